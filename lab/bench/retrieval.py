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

With ``--halfvec-recall``, what storing vectors in half precision (``halfvec``,
migration 0023) costs the vector search alone: for every scored question, the share of
its exact top K among its conversation's turns by float4 vectors that the exact top K
by halfvec keeps (``lab.probes.halfvec_recall``; the embedder's vectors of the turns'
texts and of the question), and the same for ``--synthetic-queries`` random unit
vectors among as many random unit vectors as the largest conversation has turns.

With ``--group``, each split's conversations are also merged into one group channel
(``lab.group_channels``: the same people talking with several others; by default
``interleaved``, sessions aligned on the same days and turns alternating message by
message with no threads; ``--group threads``, each conversation a thread moved by whole
years; ``--cast pairs``, every speaker under their own name instead of the ring's cast,
where each name carries two LoCoMo people), ingested and consolidated as a conversation
is, and the split's questions scored against it as above: each figure in the channel
beside the same figure alone (the split's) and their ratio, channel over alone. A
channel's questions are asked the day after its last session. In a layout with threads
(``threads``, ``threaded``) each question is also asked inside its conversation's
thread, as someone there would ask it, and scored apart ("asked in thread").
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bot import locomo
from bot.files import read_json
from bot.progress import progress
from bot.settings import Settings
from lab.bench.common import (
    BENCH,
    SPLITS,
    add_cast_argument,
    add_locomo_argument,
    bench_memory,
    channel_run_id,
    load_locomo,
    locomo_conversation,
    median,
    percentile,
    question_date,
    ratios,
    times,
)
from lab.group_channels import LAYOUTS, source_of, split_channels
from lab.observations import observations, replay_records
from lab.probes import Recall, halfvec_recall, load_bulk_messages, recall, search_vector
from memory import ConversationRef, Extractor, Memory, ReplayExtractor, ValidationError, messages

KS = (10, 30)
CATEGORIES = (1, 2, 3, 4)
KINDS = ("episode", "entity", "relation", "community")


def _system_kinds(communities: bool) -> tuple[str, ...]:
    """The document kinds the system's own figures search: with ``--communities`` those
    figures are the ones without community documents."""
    return tuple(kind for kind in KINDS if kind != "community") if communities else KINDS


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)
    parser.add_argument("--no-consolidate", action="store_true", help="search raw turns only (skip the offline extractor)")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations (0: all)")
    parser.add_argument("--only", default="", help="only these conversations, by file name, comma-separated (e.g. 26,30)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the benchmark database between runs and skip ingest and consolidation of a "
        "conversation it already holds (fast iterations on retrieval; not for ingest figures)",
    )
    parser.add_argument(
        "--communities",
        action="store_true",
        help="also build communities and score retrieval with their documents and without, in the same run",
    )
    parser.add_argument("--synthetic", type=int, default=100_000, help="episodes of the synthetic latency conversation (0: skip)")
    parser.add_argument("--synthetic-queries", type=int, default=300, help="queries timed on the synthetic conversation")
    parser.add_argument(
        "--halfvec-recall",
        action="store_true",
        help="also: how much of each question's exact top K by float4 vectors the exact top K by halfvec keeps",
    )
    parser.add_argument(
        "--group",
        nargs="?",
        const="interleaved",
        choices=LAYOUTS,
        help="also: each split's conversations merged into one group channel (lab/group_channels.py), "
        "the split's questions scored in it beside alone, with the ratio; the channel's layout: interleaved "
        "(the default, bare --group: turns alternating, no threads), threads (each conversation a thread keeping its days) "
        "or threaded (turns alternating, each conversation a thread)",
    )
    parser.add_argument(
        "--extractions",
        choices=("offline", "observations"),
        default="offline",
        help="the graph's extractions: offline (the spaCy extractor, the default) or observations (LoCoMo's own "
        "per-speaker observations replayed as facts, lab/observations.py: what better extractions would give)",
    )
    add_cast_argument(parser)


def _extractors(args: argparse.Namespace, conversations: list[locomo.Conversation]) -> dict[str, Extractor]:
    """With ``--extractions observations``, each conversation's replayed observations."""
    if args.extractions == "offline":
        return {}
    extractors: dict[str, Extractor] = {}
    for conversation in conversations:
        items = observations(read_json(Path(args.locomo) / f"{conversation.name}.json"))
        records = replay_records(items, (turn.dia_id for turn in conversation.turns))
        extractors[conversation.name] = ReplayExtractor.from_records(records)
    return extractors


@dataclass
class Score:
    """Accumulated figures of one retrieval setting."""

    questions: int = 0
    all_found: int = 0
    turn_share: float = 0.0
    tokens: int = 0
    by_category: dict[int, list[int]] = field(default_factory=dict)

    def add(self, category: int, gold: Sequence[str], context: set[str], tokens: int) -> None:
        found = sum(1 for e in gold if e in context)
        complete = found == len(gold)
        self.questions += 1
        self.all_found += complete
        self.turn_share += found / len(gold)
        self.tokens += tokens
        counts = self.by_category.setdefault(category, [0, 0])
        counts[0] += 1
        counts[1] += complete

    def figures(self) -> dict[str, Any]:
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


async def _score(
    memory: Memory,
    ref: ConversationRef,
    question: locomo.Question,
    date: datetime,
    kinds: Sequence[str],
    scores: dict[int, Score],
    split: dict[int, Score] | None = None,
    thread: str | None = None,
) -> Recall:
    """Retrieve as ``ask`` does offline over ``kinds`` (asked in ``thread`` if given),
    score the top K (also in the conversation's ``split``); what was retrieved."""
    found = await recall(memory, ref, question.question, date=date, k=max(KS), kinds=kinds, thread=thread)
    gold = list(question.evidence)  # an id that names no turn is never found: a miss
    for k in KS:
        for tally in (scores, split) if split else (scores,):
            tally[k].add(question.category, gold, found.message_ids(k), found.tokens(k))
    return found


SOURCES = ("own", "same_names", "other")


def context_sources(shown: Iterable[str], source: str, names: Mapping[str, frozenset[str]]) -> tuple[int, int, int]:
    """How many channel messages ``shown`` (ids ``<conversation>:<turn>``) come from the
    question's own conversation ``source``, from another whose cast ``names`` share a name
    with it (in the ring cast, the other life of a person it asks about), and from any
    other. Pure."""
    counts = [0, 0, 0]
    for message_id in shown:
        origin = source_of(message_id)
        counts[0 if origin == source else 1 if names.get(origin, frozenset()) & names.get(source, frozenset()) else 2] += 1
    return counts[0], counts[1], counts[2]


async def _locomo(
    memory: Memory,
    conversations: list[locomo.Conversation],
    graph: bool,
    run_id: str,
    communities: bool = False,
    extractors: dict[str, Extractor] | None = None,
) -> dict[str, Any]:
    system = {k: Score() for k in KS}
    # The same, per split: tuning is judged on the calibration split, reported on the held-out one.
    splits = {name: {k: Score() for k in KS} for name, chosen in SPLITS.items() if any(c.name in chosen for c in conversations)}
    with_communities = {k: Score() for k in KS}
    without = _system_kinds(communities)
    baselines = {"full_text": Score(), "vector": Score()}
    latencies: list[float] = []
    unscored = 0
    total = sum(1 for c in conversations for q in c.questions if q.category in CATEGORIES)
    with progress(total, "retrieval") as bar:
        for conversation in conversations:
            extractor = (extractors or {}).get(conversation.name)
            ref, _ = await locomo_conversation(memory, conversation, run_id, graph, communities, extractor)
            asked_on = question_date(conversation)
            for question in conversation.questions:
                if question.category not in CATEGORIES:
                    continue
                bar.update(1)
                if not question.evidence:
                    unscored += 1
                    continue
                split = next((splits[name] for name, chosen in SPLITS.items() if conversation.name in chosen), None)
                latencies.append((await _score(memory, ref, question, asked_on, without, system, split)).search_ms)
                if communities:
                    await _score(memory, ref, question, asked_on, KINDS, with_communities)
                gold = list(question.evidence)
                for name in baselines:
                    shown = await recall(memory, ref, question.question, date=asked_on, k=max(KS), search=name)
                    baselines[name].add(question.category, gold, shown.message_ids(), shown.tokens())
    return {
        "conversations": len(conversations),
        "questions_scored": system[KS[0]].questions,
        "questions_without_evidence": unscored,
        "consolidated": graph,
        "extractions": "observations" if extractors else "offline",
        "system": {str(k): score.figures() for k, score in system.items()},
        "splits": {name: {str(k): score.figures() for k, score in scores.items()} for name, scores in splits.items()},
        **({"system_with_communities": {str(k): s.figures() for k, s in with_communities.items()}} if communities else {}),
        "baselines_k30": {name: score.figures() for name, score in baselines.items()},
        "latency_ms": _latency(latencies),
    }


async def _group(
    memory: Memory,
    conversations: list[locomo.Conversation],
    graph: bool,
    run_id: str,
    communities: bool,
    alone: dict[str, Any],
    layout: str,
    cast: str,
) -> dict[str, Any]:
    """``--group``: per split, its channel in ``layout`` with the ``cast`` rule and its
    questions scored as ``_locomo`` scores the system's (no communities are built for it),
    beside the split's figures ``alone``."""
    group: dict[str, Any] = {}
    for name, channel in split_channels(conversations, SPLITS, layout=layout, cast=cast).items():
        conversation = channel.conversation
        ref, _ = await locomo_conversation(memory, conversation, channel_run_id(run_id, layout, cast), graph)
        asked = [q for q in conversation.questions if q.category in CATEGORIES and q.evidence]
        asked_on, scores, in_threads = question_date(conversation), {k: Score() for k in KS}, {k: Score() for k in KS}
        roots = {thread.source: thread.root for thread in channel.threads if thread.root is not None}
        names: dict[str, frozenset[str]] = {}
        for turn in conversation.turns:
            origin = source_of(turn.dia_id)
            names[origin] = names.get(origin, frozenset()) | {turn.message.speaker_name}
        sources = [0, 0, 0]
        with progress(len(asked) * (2 if roots else 1), f"retrieval {conversation.name}") as bar:
            for question in asked:
                bar.update(1)
                found = await _score(memory, ref, question, asked_on, _system_kinds(communities), scores)
                origin = source_of(question.evidence[0])
                shown = context_sources(found.message_ids(max(KS)), origin, names)
                sources = [total + count for total, count in zip(sources, shown, strict=True)]
                if roots:  # asked again inside its conversation's thread, as a person there would
                    bar.update(1)
                    thread = roots[origin]
                    await _score(memory, ref, question, asked_on, _system_kinds(communities), in_threads, thread=thread)
        figures = {str(k): score.figures() for k, score in scores.items()}
        threaded = {str(k): score.figures() for k, score in in_threads.items()} if roots else None
        group[name] = {
            "channel_name": conversation.name,
            "layout": layout,
            "cast_rule": cast,
            "cast": list(conversation.speakers),
            "messages": len(conversation.turns),
            "alone": alone[name],
            "channel": figures,
            "ratio": ratios(figures, alone[name]),
            f"context_sources_k{max(KS)}": {
                key: round(count / max(sum(sources), 1), 4) for key, count in zip(SOURCES, sources, strict=True)
            },
            **({"in_thread": threaded, "in_thread_ratio": ratios(threaded, alone[name])} if threaded else {}),
        }
    return group


def _latency(values: list[float]) -> dict[str, Any]:
    return {"count": len(values), "median": round(median(values), 2), "p99": round(percentile(values, 0.99), 2)}


def _unit_vectors(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    unit: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit


def _batches(
    texts: list[str], size: int, dim: int, rng: np.random.Generator, batch: int = 5_000
) -> Iterator[tuple[list[str], np.ndarray]]:
    """``size`` messages (the LoCoMo texts over and over) with random unit vectors, in
    batches (made as they are loaded: 100K vectors at once would not fit in memory)."""
    for start in range(0, size, batch):
        count = min(batch, size - start)
        vectors = _unit_vectors(count, dim, rng)
        yield [texts[(start + i) % len(texts)] for i in range(count)], vectors


async def _synthetic(memory: Memory, texts: list[str], asked: list[str], size: int, queries: int) -> dict[str, Any]:
    """Bulk-load ``size`` messages, then time the hybrid search of ``queries`` LoCoMo
    questions (random query vectors: the documents' are random too)."""
    rng = np.random.default_rng(7)
    ref = ConversationRef("bench", uuid.uuid4().hex[:6], "synthetic")
    began = time.perf_counter()
    await load_bulk_messages(memory, ref, "Sam", _batches(texts, size, memory.embedder.dim, rng))
    load_seconds = time.perf_counter() - began
    questions = random.Random(7).sample(asked, min(queries, len(asked)))
    query_vectors = _unit_vectors(len(questions), memory.embedder.dim, rng)
    latencies: list[float] = []
    plan = None
    for question, vector in zip(questions, query_vectors, strict=True):
        began = time.perf_counter()
        found = await search_vector(memory, ref, question, vector.tolist())
        latencies.append((time.perf_counter() - began) * 1000)
        plan = found.plan
    return {
        "episodes": len(await messages(memory, ref, principal=BENCH)),
        "load_seconds": round(load_seconds, 1),
        "plan": {"exact": list(plan.exact), "hnsw": list(plan.hnsw), "ef_search": plan.ef_search} if plan else None,
        "search_ms": _latency(latencies),
    }


def _kept(shares: list[float]) -> dict[str, Any]:
    return {
        "queries": len(shares),
        "mean": round(float(np.mean(shares)), 4) if shares else None,
        "min": round(min(shares), 4) if shares else None,
        "identical": round(sum(share == 1.0 for share in shares) / len(shares), 4) if shares else None,
    }


async def _halfvec_recall(memory: Memory, conversations: list[locomo.Conversation], random_queries: int) -> dict[str, Any]:
    """``--halfvec-recall`` (see the module docstring): per K, the share of the float4
    top K that the halfvec top K keeps, for the LoCoMo questions and for random vectors."""
    found: dict[int, list[float]] = {k: [] for k in KS}
    for conversation in conversations:
        asked = [q.question for q in conversation.questions if q.category in CATEGORIES and q.evidence]
        turns = (await memory.embedder.embed([t.message.text for t in conversation.turns])).vectors
        questions = (await memory.embedder.embed(asked)).vectors
        for k, shares in (await halfvec_recall(memory, turns, questions, KS)).items():
            found[k] += shares
    rng = np.random.default_rng(7)
    size = max(len(c.turns) for c in conversations)
    documents, queries = _unit_vectors(size, memory.embedder.dim, rng), _unit_vectors(random_queries, memory.embedder.dim, rng)
    random_found = await halfvec_recall(memory, documents.tolist(), queries.tolist(), KS)
    return {
        "locomo": {str(k): _kept(shares) for k, shares in found.items()},
        "random": {"documents": size, **{str(k): _kept(shares) for k, shares in random_found.items()}},
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    if args.reuse and args.synthetic:
        raise ValidationError("--reuse", "the synthetic latency conversation would pile up in a kept database; add --synthetic 0")
    if args.cast != "ring" and not args.group:
        raise ValidationError("--cast", "names the cast of the group channel: add --group")
    conversations = load_locomo(args.locomo)
    if args.only:
        wanted = {name.strip() for name in args.only.split(",")}
        conversations = [c for c in conversations if c.name in wanted]
    if args.conversations:
        conversations = conversations[: args.conversations]
    if args.group and not any(c.name in chosen for c in conversations for chosen in SPLITS.values()):
        raise ValidationError("--group", "channels are built per split: run conversations of the calibration or held-out split")
    graph = not args.no_consolidate
    if args.extractions != "offline" and (args.group or not graph):
        raise ValidationError("--extractions", "observations are replayed on conversations alone: drop --group, --no-consolidate")
    extractors = _extractors(args, conversations)
    # A reused database keeps one copy of each conversation per graph setting.
    setting = ("reuse-observations" if extractors else "reuse-graph") if graph else "reuse-raw"
    run_id = setting if args.reuse else uuid.uuid4().hex[:6]
    # A database of its own, so that a normal run (which starts from a fresh one) never
    # drops what --reuse keeps.
    database = "stashbird_bench_retrieval_reuse" if args.reuse else "stashbird_bench_retrieval"
    async with bench_memory(settings, database, keep=args.reuse) as memory:
        if args.communities and not graph:
            raise ValidationError("--communities", "communities are built from the graph: drop --no-consolidate")
        result = {"bench": "retrieval", **await _locomo(memory, conversations, graph, run_id, args.communities, extractors)}
        if args.group:
            result["group"] = await _group(
                memory, conversations, graph, run_id, args.communities, result["splits"], args.group, args.cast
            )
        if args.synthetic:
            texts = [t.message.text for c in conversations for t in c.turns]
            asked = [q.question for c in conversations for q in c.questions]
            result["synthetic"] = await _synthetic(memory, texts, asked, args.synthetic, args.synthetic_queries)
        if args.halfvec_recall:
            result["halfvec_recall"] = await _halfvec_recall(memory, conversations, args.synthetic_queries)
    return result


def _line(name: str, figures: dict[str, Any]) -> str:
    return (
        f"  {name:<22} all evidence {figures['all_evidence']:6.1%}   evidence turns {figures['evidence_turns']:6.1%}   "
        f"tokens/question {figures['tokens_per_question']:7.1f}   by category "
        + " ".join(f"{c}:{v:.0%}" for c, v in figures["all_evidence_by_category"].items())
    )


def _group_lines(group: dict[str, Any]) -> list[str]:
    """Per split, each figure in its group channel beside alone, and channel over alone."""
    lines = ["group channels (each split's conversations in one channel, lab/group_channels.py), the same questions:"]
    for name, split in group.items():
        questions = next(iter(split["channel"].values()))["questions"]
        lines.append(
            f"  {name}: channel {split['channel_name']} ({split['layout']} layout, {split['cast_rule']} cast), "
            f"{split['messages']} messages, "
            f"cast {', '.join(split['cast'])}; "
            f"{questions} questions scored"
        )
        for k, ratio in split["ratio"].items():
            lines += [_line(f"  alone K={k}", split["alone"][k]), _line(f"  channel K={k}", split["channel"][k])]
            lines.append(
                f"  {f'  channel/alone K={k}':<22} all evidence {times(ratio['all_evidence']):>6}   evidence turns "
                f"{times(ratio['evidence_turns']):>6}   tokens/question {times(ratio['tokens_per_question']):>7}   by category "
                + " ".join(f"{c}:{times(v)}" for c, v in ratio["all_evidence_by_category"].items())
            )
        shares = split[f"context_sources_k{max(KS)}"]
        lines.append(
            f"    messages of the channel's K={max(KS)} contexts: {shares['own']:.1%} from the question's conversation, "
            f"{shares['same_names']:.1%} from others where one of its names talks too, {shares['other']:.1%} from the rest"
        )
        for k, figures in split.get("in_thread", {}).items():
            ratio = split["in_thread_ratio"][k]["all_evidence"]
            lines.append(_line(f"  asked in thread K={k}", figures) + f"   ({times(ratio)} alone)")
    return lines


def _graph(result: dict[str, Any]) -> str:
    if not result["consolidated"]:
        return "not built (raw turns only)"
    if result.get("extractions") == "observations":
        return "LoCoMo's observations replayed as facts (lab/observations.py)"
    return "consolidated offline"


def render(result: dict[str, Any]) -> str:
    lines = [
        f"LoCoMo: {result['conversations']} conversations, {result['questions_scored']} questions of categories 1-4 scored "
        f"({result['questions_without_evidence']} without evidence ids not scored); "
        f"graph {_graph(result)}",
    ]
    lines += [_line(f"stashbird K={k}", figures) for k, figures in result["system"].items()]
    for name, scores in result.get("splits", {}).items():
        lines += [_line(f"  {name} K={k}", figures) for k, figures in scores.items()]
    if "system_with_communities" in result:
        lines += [_line(f"+ communities K={k}", f) for k, f in result["system_with_communities"].items()]
    lines += [_line(f"{name} K=30 (raw turns)", figures) for name, figures in result["baselines_k30"].items()]
    lines.append("  reference BM25 K=30 (raw turns): all evidence 55.8%, evidence turns 61.5%; target >= 80% at K=30 offline")
    latency = result["latency_ms"]
    lines.append(
        f"retrieval latency per question (query embedding + hybrid search, no LLM): "
        f"median {latency['median']} ms, p99 {latency['p99']} ms over {latency['count']}"
    )
    if "group" in result:
        lines += _group_lines(result["group"])
    if "synthetic" in result:
        synthetic = result["synthetic"]
        search_ms = synthetic["search_ms"]
        lines.append(
            f"synthetic conversation of {synthetic['episodes']} episodes (loaded in {synthetic['load_seconds']} s, "
            f"plan {synthetic['plan']}): hybrid search median {search_ms['median']} ms, p99 {search_ms['p99']} ms "
            f"over {search_ms['count']} queries (target p99 < 50 ms)"
        )
    if "halfvec_recall" in result:
        kept = result["halfvec_recall"]
        for name, label in (("locomo", "LoCoMo questions among their turns"), ("random", "random unit vectors")):
            lines.append(
                f"halfvec against float4, exact top K ({label}): "
                + "; ".join(
                    f"K={k} kept {f['mean']:.2%} on average, {f['min']:.0%} at worst, all of it for {f['identical']:.1%} "
                    f"of {f['queries']} queries"
                    for k, f in kept[name].items()
                    if k != "documents"
                )
            )
    return "\n".join(lines)
