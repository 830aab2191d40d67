"""The choices a hybrid search makes before it runs (memory.retrieval.search reads
the sizes and term statistics, and runs them): how each document kind is searched by
vector, and which of the question's terms the full-text query looks for and how much each
weighs. Pure, so that a plan is tested and reasoned about without a database.

Vector plan. pgvector 0.6 filters an HNSW scan *after* the index returns its
``ef_search`` candidates, so an index over every conversation finds too few rows of one
that holds a small share of it. Therefore (memory.store.vector_indexes):
- a kind with the conversation's own index (past ``own_index_rows(kind)`` documents) uses
  that index, where the share is 1: its cost does not grow with the store;
- any other (conversation, kind) is scanned exactly through ``uq_search_document_ref``
  (the ``+ 0`` on the distance keeps the planner off any HNSW index): exact and, below
  ``EXACT_SCAN_ROWS`` documents, a few milliseconds;
- except where the table has the shared HNSW index (on Citus, each shard's): a kind of
  ``EXACT_SCAN_ROWS`` documents or more uses it with ``hnsw.ef_search`` raised
  (``SET LOCAL``) so that the expected number of candidates of this conversation and
  kind is ``OVERFETCH`` times the rows wanted; when that would need more than
  pgvector's maximum ef_search (1000), the exact scan is used: slower but never
  silently incomplete.
Every HNSW statement is planned with the conversation's values (``force_custom_plan``),
or the planner could not pick the conversation's index.
Figures are printed by ``stashbird bench retrieval``.

Full-text query. The question's English lexemes are OR-ed into a ``tsquery``, each
quoted whole (the parser keeps "cut-over" as the lexeme ``cut-ov``, which is what
matches the compound; split again it would match nothing), so that any of them may
match. Matches are ranked by the summed weight of the terms they hold, BM25's idf
measured on up to ``TERM_SAMPLE`` messages of the conversation (all of them in a small
one), ties by ``ts_rank_cd`` (terms close together): ``ts_rank_cd`` alone knows nothing
of how common a term is and ranks a message that only names a speaker with one that
holds the question's rare word. Terms found in more than ``COMMON_TERM_SHARE`` of the
messages (a speaker's name in a two-person chat, "time", "love") are left out of the
query unless nothing else is left: they would match half the conversation and make the
ranking slow on a large one. In a large conversation the rarest terms are kept only
while the messages they are expected to match stay under ``TEXT_MATCH_ROWS``, and at
most that many matches are ranked, which bounds the work (the vector side still sees
everything).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

EXACT_SCAN_ROWS = 20_000
OVERFETCH = 2.0
MAX_EF_SEARCH = 1000
COMMON_TERM_SHARE = 0.10
TERM_SAMPLE = 1_000
# Matches the full-text query of a large conversation is built to expect, and ranks at
# most: 250 keeps the p99 of a search over 100K messages under 50 ms on two cores
# (500: 53-57 ms); the top 60 of 250 matches of the rarest terms is still a ranking.
TEXT_MATCH_ROWS = 250
# Below this many messages shares are too coarse to call a term common (one message in
# a short chat is already several percent), and ranking every match costs nothing.
PRUNE_FROM_MESSAGES = 200


@dataclass(frozen=True)
class VectorPlan:
    """How each kind is searched by vector: ``exact`` kinds and ``hnsw`` kinds with the
    ``ef_search`` to use; kinds with no documents are left out."""

    exact: tuple[str, ...]
    hnsw: tuple[str, ...] = ()
    ef_search: int = 0
    episode_rows: int = 0  # the conversation's messages (estimated when large)


def rare_terms(
    shares: dict[str, float], messages: int = 0, limit: float = COMMON_TERM_SHARE, match_rows: int = TEXT_MATCH_ROWS
) -> list[str]:
    """The query terms to search for: those not common in the conversation (all of
    them when every one is common), rarest first while the ``messages`` they are
    expected to match stay under ``match_rows`` (the rarest is always kept). Pure."""
    rare = sorted((share, term) for term, share in shares.items() if share <= limit) or sorted(
        (share, term) for term, share in shares.items()
    )
    kept: list[str] = []
    expected = 0.0
    for share, term in rare:
        expected += share * messages
        if kept and expected > match_rows:
            break
        kept.append(term)
    return sorted(kept)


def tsquery_text(terms: Sequence[str]) -> str:
    """The lexemes OR-ed as ``tsquery`` input, each quoted so that it is taken as one
    lexeme whatever it holds: the English parser keeps hyphenated words whole
    ("cut-over" is the lexeme ``cut-ov`` besides ``cut`` and ``over``), and a parser
    would split them again. Pure."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def term_weight(share: float, sampled: int) -> float:
    """How much matching one term says (BM25's idf from its share of the sampled
    messages): a rare term far more than a speaker's name found everywhere. Pure."""
    found = share * sampled
    return math.log(1 + (sampled - found + 0.5) / (found + 0.5))


def estimate_size(counted: int, planned: float | None) -> int:
    """Rows of one (conversation, kind): the capped count when it is below the cap,
    else the planner's estimate, never below the count. Pure."""
    if counted < EXACT_SCAN_ROWS or planned is None:
        return counted
    return max(counted, int(planned))


def choose_plan(
    sizes: dict[str, int], table_rows: int, top: int, own: frozenset[str] = frozenset(), *, shared: bool = False
) -> VectorPlan:
    """Pure plan choice from the per-kind document counts of the conversation, the
    number of rows of the whole table, the kinds that have the conversation's own index
    and whether the table has the shared one (see the module docstring)."""
    exact: list[str] = []
    hnsw: list[str] = []
    ef = 0
    for kind, size in sizes.items():
        if size == 0:
            continue
        if kind in own:
            hnsw.append(kind)
            ef = max(ef, math.ceil(OVERFETCH * top), 40)
            continue
        if size < EXACT_SCAN_ROWS or not shared:
            exact.append(kind)
            continue
        share = size / max(table_rows, size)
        needed = math.ceil(OVERFETCH * top / share)
        if needed > MAX_EF_SEARCH:
            exact.append(kind)
        else:
            hnsw.append(kind)
            ef = max(ef, needed, 40)
    return VectorPlan(tuple(exact), tuple(hnsw), ef, sizes.get("episode", 0))


Statements = list[tuple[tuple[str, ...], bool]]  # (kinds, exact) of each vector statement


def vector_statements(plan: VectorPlan, two_connections: bool) -> tuple[Statements, Statements]:
    """The vector statements of the first connection and of the second (after its full
    text): all on the first, except that with two connections a plan with HNSW kinds and
    exact ones (a conversation with its own indexes scans its few communities exactly)
    leaves the exact scans to the second. One after the other on the first, the two took
    twice as long as the full text on the second (1M messages, largest conversation:
    13 ms each against 10 ms). Pure."""
    exact: Statements = [(plan.exact, True)] if plan.exact else []
    hnsw: Statements = [(plan.hnsw, False)] if plan.hnsw else []
    if two_connections and exact and hnsw:
        return hnsw, exact
    return exact + hnsw, []
