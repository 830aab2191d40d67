"""``stashbird bench retrieval``: does the context handed to the answerer hold the turns
each LoCoMo answer rests on, at what token cost, and how fast is retrieval? No LLM.

For every LoCoMo conversation: ingest the turns (local embeddings), consolidate them
with the offline extractor (``--no-consolidate`` skips it), then for every question of
categories 1-4 run retrieval as ``stashbird ask`` does offline and assemble the top K
evidence items, K = 10 and 30. A gold evidence turn counts as found when it is in the
context: a retrieved episode, or a supporting episode attached to a retrieved relation
or entity. Evidence ids are read as ``bot.locomo.evidence_ids`` normalises them; ids
that name no turn count as misses.
Questions without any evidence id cannot be scored and are reported apart. Tokens are
the tiktoken count of the evidence exactly as the answerer's prompt shows it.

With ``--communities`` the conversations' communities are built after consolidation and
every question is retrieved twice, without community documents and with them (a
community item cites the episodes supporting the relations between its members).

Baselines from the same run, over raw turns only: full-text search alone (every term
of the question, OR-ed, ranked by ts_rank_cd) and vector search alone (each message by
its own vector, not its exchange), K = 30 (the issue's reference: BM25 over raw turns at
K = 30 finds all evidence for 55.8% of questions and 61.5% of evidence turns).

Latency: per question, retrieval without LLM calls (query embedding + hybrid search);
then one synthetic conversation of ``--synthetic`` episodes (LoCoMo texts reused with
random unit vectors, bulk-inserted and chained), timed on the search alone since its
vectors are not the embedder's.
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from sqlalchemy import func, select, text

from bot import locomo
from bot.bench.common import (
    REUSE_DATABASE,
    add_locomo_argument,
    bench_memory,
    load_locomo,
    locomo_conversation,
    median,
    percentile,
    reuse_run_id,
)
from bot.progress import progress
from bot.settings import Settings
from memory.core import Memory
from memory.errors import ValidationError
from memory.models.tokens import count_tokens
from memory.retrieval.evidence import EvidenceItem, assemble, format_evidence
from memory.retrieval.pipeline import retrieve
from memory.retrieval.search import QueryVariant, search
from memory.store.conversations import ConversationRef, ensure_conversation
from memory.store.documents import KINDS
from memory.store.schema import Episode

KS = (10, 30)
CATEGORIES = (1, 2, 3, 4)


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)
    parser.add_argument("--no-consolidate", action="store_true", help="search raw turns only (skip the offline extractor)")
    parser.add_argument(
        "--communities", action="store_true",
        help="also build communities and score retrieval with their documents and without, in the same run",
    )
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations (0: all)")
    parser.add_argument(
        "--only", default="", help="only these conversations, by file name, comma-separated (e.g. 26,30)"
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the benchmark database between runs and skip ingest and consolidation of a "
        "conversation it already holds (fast iterations on retrieval; not for ingest figures)",
    )
    parser.add_argument("--synthetic", type=int, default=100_000, help="episodes of the synthetic latency conversation (0: skip)")
    parser.add_argument("--synthetic-queries", type=int, default=300, help="queries timed on the synthetic conversation")


@dataclass
class Score:
    """Accumulated figures of one retrieval setting."""

    questions: int = 0
    all_found: int = 0
    turn_share: float = 0.0
    tokens: int = 0
    by_category: dict[int, list[int]] = field(default_factory=dict)

    def add(self, category: int, gold: Sequence[int | None], context: set[int], tokens: int) -> None:
        found = sum(1 for e in gold if e is not None and e in context)
        complete = found == len(gold)
        self.questions += 1
        self.all_found += complete
        self.turn_share += found / len(gold)
        self.tokens += tokens
        counts = self.by_category.setdefault(category, [0, 0])
        counts[0] += 1
        counts[1] += complete

    def figures(self) -> dict:
        n = max(self.questions, 1)
        return {
            "questions": self.questions,
            "all_evidence": round(self.all_found / n, 4),
            "evidence_turns": round(self.turn_share / n, 4),
            "tokens_per_question": round(self.tokens / n, 1),
            "all_evidence_by_category": {
                str(c): round(found / total, 4) for c, (total, found) in sorted(self.by_category.items())
            },
        }


def gold_episodes(question: locomo.Question, episode_of: dict[str, int]) -> list[int | None]:
    """The evidence turns as episode ids; ``None`` for an id that names no turn (a miss)."""
    return [episode_of.get(e) for e in question.evidence]


def context_episodes(items: Sequence[EvidenceItem]) -> set[int]:
    return {episode.episode_id for item in items for episode in item.episodes}


async def _baseline(memory: Memory, conversation_id: int, question: str, vector: Sequence[float], method: str, k: int) -> list[EvidenceItem]:
    async with memory.sessions.begin() as session:
        found = await search(
            session,
            conversation_id,
            [QueryVariant(question, vector)],
            top=k,
            kinds=("episode",),
            methods=(method,),
            common_terms=True,
            exchange_vectors=False,
        )
        return await assemble(session, conversation_id, found.candidates, k, context_items=0)


async def _score(
    memory: Memory, conversation_id: int, question: locomo.Question, gold: list[int | None], date: datetime,
    kinds: Sequence[str], scores: dict[int, Score],
) -> float:
    """Retrieve as ``ask`` does offline over ``kinds``, score the top K; the latency (ms)."""
    began = time.perf_counter()
    retrieval = await retrieve(memory, conversation_id, question.question, date, kinds=kinds)
    latency = (time.perf_counter() - began) * 1000
    async with memory.sessions() as session:
        items = await assemble(session, conversation_id, retrieval.candidates, max(KS))
    for k in KS:
        shown = items[:k]
        scores[k].add(question.category, gold, context_episodes(shown), count_tokens(format_evidence(shown)))
    return latency


async def _locomo(
    memory: Memory, conversations: list[locomo.Conversation], consolidate: bool, run_id: str, communities: bool = False
) -> dict:
    system = {k: Score() for k in KS}
    with_communities = {k: Score() for k in KS}
    without = tuple(kind for kind in KINDS if kind != "community") if communities else KINDS
    baselines = {"full_text": Score(), "vector": Score()}
    latencies: list[float] = []
    unscored = 0
    total = sum(1 for c in conversations for q in c.questions if q.category in CATEGORIES)
    with progress(total, "retrieval") as bar:
        for conversation in conversations:
            conversation_id, episode_of = await locomo_conversation(memory, conversation, run_id, consolidate, communities)
            question_date = max(conversation.session_dates.values()) + timedelta(days=1)
            for question in conversation.questions:
                if question.category not in CATEGORIES:
                    continue
                bar.update(1)
                if not question.evidence:
                    unscored += 1
                    continue
                gold = gold_episodes(question, episode_of)
                latencies.append(await _score(memory, conversation_id, question, gold, question_date, without, system))
                if communities:
                    await _score(memory, conversation_id, question, gold, question_date, KINDS, with_communities)
                vector = (await memory.embedder.embed([question.question])).vectors[0]
                for name, method in (("full_text", "text"), ("vector", "vector")):
                    shown = await _baseline(memory, conversation_id, question.question, vector, method, max(KS))
                    baselines[name].add(question.category, gold, context_episodes(shown), count_tokens(format_evidence(shown)))
    return {
        "conversations": len(conversations),
        "questions_scored": system[KS[0]].questions,
        "questions_without_evidence": unscored,
        "consolidated": consolidate,
        "system": {str(k): score.figures() for k, score in system.items()},
        **({"system_with_communities": {str(k): s.figures() for k, s in with_communities.items()}} if communities else {}),
        "baselines_k30": {name: score.figures() for name, score in baselines.items()},
        "latency_ms": _latency(latencies),
    }


def _latency(values: list[float]) -> dict:
    return {"count": len(values), "median": round(median(values), 2), "p99": round(percentile(values, 0.99), 2)}


def _unit_vectors(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


async def _synthetic(memory: Memory, texts: list[str], asked: list[str], size: int, queries: int) -> dict:
    """Bulk-insert ``size`` episodes (the LoCoMo turns over and over) with their search
    documents in batches of ``INSERT ... SELECT``, then time the hybrid search of
    ``queries`` LoCoMo questions (random query vectors: the documents' are random too)."""
    rng = np.random.default_rng(7)
    ref = ConversationRef("bench", uuid.uuid4().hex[:6], "synthetic")
    async with memory.sessions.begin() as session:
        conversation_id = await ensure_conversation(session, ref)
        speaker = (
            await session.execute(
                text(
                    "INSERT INTO speakers (conversation_id, platform_user_id, display_name, role) "
                    "VALUES (:c, 'synthetic', 'Sam', 'user') RETURNING id"
                ),
                {"c": conversation_id},
            )
        ).scalar_one()
    began = time.perf_counter()
    batch = 5_000
    dim = memory.embedder.dim
    for start in range(0, size, batch):
        count = min(batch, size - start)
        vectors = _unit_vectors(count, dim, rng)
        chosen = [texts[(start + i) % len(texts)] for i in range(count)]
        async with memory.sessions.begin() as session:
            await session.execute(
                text(
                    "WITH input AS (SELECT * FROM unnest(CAST(:texts AS text[]), CAST(:vectors AS text[]), "
                    "CAST(:numbers AS bigint[])) AS t(body, vector, n)), "
                    "stored AS (INSERT INTO episodes (conversation_id, speaker_id, role, text, message_time, platform_message_id) "
                    "SELECT :c, :s, 'user', body, timestamptz '2020-01-01' + n * interval '1 minute', 's' || n FROM input "
                    "RETURNING id, text, message_time, platform_message_id) "
                    "INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding, message_time, is_current) "
                    "SELECT :c, 'episode', stored.id, stored.text, CAST(input.vector AS vector), stored.message_time, true "
                    "FROM stored JOIN input ON stored.platform_message_id = 's' || input.n"
                ),
                {
                    "c": conversation_id,
                    "s": speaker,
                    "texts": chosen,
                    "vectors": ["[" + ",".join(f"{x:.5f}" for x in v) + "]" for v in vectors],
                    "numbers": list(range(start, start + count)),
                },
            )
    async with memory.engine.begin() as connection:
        # The chain, as ingestion would have linked it (retrieval reads it for neighbours).
        await connection.execute(
            text(
                "UPDATE episodes e SET prev_id = c.prev, next_id = c.next FROM (SELECT id, "
                "lag(id) OVER (ORDER BY message_time, id) AS prev, lead(id) OVER (ORDER BY message_time, id) AS next "
                "FROM episodes WHERE conversation_id = :c) c WHERE e.id = c.id"
            ),
            {"c": conversation_id},
        )
    async with memory.engine.begin() as connection:
        # Fresh planner statistics, as autovacuum would gather after such a load.
        await connection.execute(text("ANALYZE search_documents"))
    load_seconds = time.perf_counter() - began
    questions = random.Random(7).sample(asked, min(queries, len(asked)))
    query_vectors = _unit_vectors(len(questions), dim, rng)
    latencies: list[float] = []
    plan = None
    for question, vector in zip(questions, query_vectors):
        began = time.perf_counter()
        async with memory.sessions.begin() as session, memory.sessions() as text_session:
            found = await search(
                session,
                conversation_id,
                [QueryVariant(question, vector.tolist())],
                top=memory.params.search_top,
                rrf_k=memory.params.rrf_k,
                chain_share=memory.params.chain_share,
                text_session=text_session,
            )
        latencies.append((time.perf_counter() - began) * 1000)
        plan = found.plan
    async with memory.sessions.begin() as session:
        episodes = (await session.execute(select(func.count()).select_from(Episode).where(Episode.conversation_id == conversation_id))).scalar_one()
    return {
        "episodes": episodes,
        "load_seconds": round(load_seconds, 1),
        "plan": {"exact": list(plan.exact), "hnsw": list(plan.hnsw), "ef_search": plan.ef_search} if plan else None,
        "search_ms": _latency(latencies),
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict:
    if args.reuse and args.synthetic:
        raise ValidationError("--reuse", "the synthetic latency conversation would pile up in a kept database; add --synthetic 0")
    conversations = load_locomo(args.locomo)
    if args.only:
        wanted = {name.strip() for name in args.only.split(",")}
        conversations = [c for c in conversations if c.name in wanted]
    if args.conversations:
        conversations = conversations[: args.conversations]
    consolidate = not args.no_consolidate
    run_id = reuse_run_id(consolidate) if args.reuse else uuid.uuid4().hex[:6]
    database = REUSE_DATABASE if args.reuse else "stashbird_bench_retrieval"
    async with bench_memory(settings, database, keep=args.reuse) as memory:
        if args.communities and not consolidate:
            raise ValidationError("--communities", "communities are built from the graph: drop --no-consolidate")
        result = {"bench": "retrieval", **await _locomo(memory, conversations, consolidate, run_id, args.communities)}
        if args.synthetic:
            texts = [t.message.text for c in conversations for t in c.turns]
            asked = [q.question for c in conversations for q in c.questions]
            result["synthetic"] = await _synthetic(memory, texts, asked, args.synthetic, args.synthetic_queries)
    return result


def _line(name: str, figures: dict) -> str:
    return (
        f"  {name:<22} all evidence {figures['all_evidence']:6.1%}   evidence turns {figures['evidence_turns']:6.1%}   "
        f"tokens/question {figures['tokens_per_question']:7.1f}   by category "
        + " ".join(f"{c}:{v:.0%}" for c, v in figures["all_evidence_by_category"].items())
    )


def render(result: dict) -> str:
    lines = [
        f"LoCoMo: {result['conversations']} conversations, {result['questions_scored']} questions of categories 1-4 scored "
        f"({result['questions_without_evidence']} without evidence ids not scored); "
        f"graph {'consolidated offline' if result['consolidated'] else 'not built (raw turns only)'}",
    ]
    lines += [_line(f"stashbird K={k}", figures) for k, figures in result["system"].items()]
    if "system_with_communities" in result:
        lines += [_line(f"+ communities K={k}", f) for k, f in result["system_with_communities"].items()]
    lines += [_line(f"{name} K=30 (raw turns)", figures) for name, figures in result["baselines_k30"].items()]
    lines.append("  reference BM25 K=30 (raw turns): all evidence 55.8%, evidence turns 61.5%; target >= 80% at K=30 offline")
    latency = result["latency_ms"]
    lines.append(
        f"retrieval latency per question (query embedding + hybrid search, no LLM): "
        f"median {latency['median']} ms, p99 {latency['p99']} ms over {latency['count']}"
    )
    if "synthetic" in result:
        synthetic = result["synthetic"]
        search_ms = synthetic["search_ms"]
        lines.append(
            f"synthetic conversation of {synthetic['episodes']} episodes (loaded in {synthetic['load_seconds']} s, "
            f"plan {synthetic['plan']}): hybrid search median {search_ms['median']} ms, p99 {search_ms['p99']} ms "
            f"over {search_ms['count']} queries (target p99 < 50 ms)"
        )
    return "\n".join(lines)
