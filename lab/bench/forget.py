"""``stashbird bench forget``: deletion interventions over LoCoMo with supplied
extractions, per deletion policy, and deletion latency at 1K and 100K episodes.

Supplied extractions come from the annotations: for each question with evidence turns, a
fact relation from the speaker of its first evidence turn to a per-question topic entity,
both supported by the evidence turns; each evidence turn words the fact in its own text
(plus the fact's marker), as an extractor reading that turn would; the speaker entity is
supported by every evidence turn of its facts; one community per speaker holds it and
its topics, with a summary naming its facts. Every turn, fact and topic carries a unique
marker token so that the residue scan (memory/store/residue.py) can tell what survived. Vectors are random: nothing here
depends on what they mean, and embedding 17K turns would only slow the run.

Per conversation and policy the same interventions run in sequence: delete one
supporting turn of a multiply-supported fact, delete every supporting turn of a fact,
delete a turn outside every support set. After each one the store is compared with the
ground truth (a fact must exist iff some support is left): unsupported relations left
behind, supported relations lost, search documents left for removed records (including
anchors and dirtied communities), each record counted once, for the intervention that
did it; after all of them, the residue scan looks for the markers of deleted turns and
of facts and topics that lost all support, and the word-level scan for every word that
only deleted turns said (no surviving turn of the conversation says it; the benchmark's
own words "said", "person" and "topic" aside), counted once per conversation.

The latency part runs in a database of its own without the HNSW vector index: Postgres
deletes leave index entries to VACUUM, so that index is not on the deletion path, and
maintaining it for 240K random vectors would take most of the run.

``--author`` measures forgetting a person instead (memory.forget_author): per count in
``--author-counts``, two identical ``--size``-message bulk conversations in which that
many messages, spread evenly, are one person's (lab.synthetic ``bulk_graph``); in one,
the batched forgetting of all of them is timed; in the other, one-by-one deletion
(``forget`` per message) of all of them, or of ``--sample`` of them, extrapolated to all
(the output says which). Then the word-level residue scan of the batched conversation
for every word only the person's messages said, which must find none.
"""

from __future__ import annotations

import argparse
import os
import random
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bot import locomo
from bot.progress import progress
from bot.settings import Settings
from lab.bench.common import (
    BENCH,
    add_locomo_argument,
    bench_memory,
    load_locomo,
    median,
    percentile,
)
from lab.probes import (
    ForgettingPolicy,
    SuppliedCommunity,
    SuppliedEntity,
    SuppliedGraph,
    SuppliedRelation,
    drop_vector_index,
    forget_by_policy,
    integrity,
    load_bulk_graph,
    load_supplied,
    residue,
    word_residue,
)
from memory import ConversationRef, Memory, ValidationError, Workspace, forget, forget_author

TAGS: dict[ForgettingPolicy, str] = {"stashbird": "s", "episode-only": "e", "cascade": "c"}
KINDS = ("one support of a multiply-supported fact", "all supports of a fact", "a turn outside every support set")
COLUMNS = ("unsupported_left", "supported_lost", "orphan_documents")
BENCH_WORDS = ("said", "person", "topic")  # the benchmark's own predicate and entity types


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)
    parser.add_argument("--per-kind", type=int, default=3, help="interventions of each kind per conversation")
    parser.add_argument("--sizes", default="1000,100000", help="episodes in the latency conversations")
    parser.add_argument("--deletes", type=int, default=200, help="timed deletions per latency size")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--policies", default=",".join(TAGS), help="deletion policies to compare, comma-separated ('' for latency only)"
    )
    parser.add_argument("--author", action="store_true", help="measure forgetting a person instead (batched vs one by one)")
    parser.add_argument("--author-counts", default="1000,10000", help="with --author: the person's messages per conversation")
    parser.add_argument("--size", type=int, default=100_000, help="with --author: messages per conversation")
    parser.add_argument(
        "--sample", type=int, default=1000, help="with --author: one-by-one deletions timed at most (then extrapolated)"
    )


# --- supplied extractions -------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    index: int
    speaker: str
    support: frozenset[str]  # dia ids


def marker(tag: str, kind: str, conversation: str, key: str) -> str:
    """A lowercase alphanumeric token ending in a digit, so stemming leaves it whole."""
    return f"zq{tag}{kind}{conversation}{key}".lower()


def turn_key(dia_id: str) -> str:
    return dia_id.replace(":", "x")


def supplied_facts(conversation: locomo.Conversation) -> list[Fact]:
    speakers = {t.dia_id: t.message.speaker_name for t in conversation.turns}
    facts = []
    for index, question in enumerate(conversation.questions):
        evidence = [e for e in dict.fromkeys(question.evidence) if e in speakers]
        if evidence:
            facts.append(Fact(index, speakers[evidence[0]], frozenset(evidence)))
    return facts


def plan(conversation: locomo.Conversation, facts: list[Fact], per_kind: int, rng: random.Random) -> list[tuple[int, list[str]]]:
    """(kind, turns to delete) in order; later picks avoid turns already deleted."""
    deleted: set[str] = set()
    steps: list[tuple[int, list[str]]] = []
    multi = [f for f in facts if len(f.support) >= 2]
    for fact in rng.sample(multi, min(per_kind, len(multi))):
        choices = sorted(fact.support - deleted)
        if len(choices) == len(fact.support):
            turn = rng.choice(choices)
            deleted.add(turn)
            steps.append((0, [turn]))
    whole = [f for f in facts if not f.support & deleted]
    for fact in rng.sample(whole, min(per_kind, len(whole))):
        if not fact.support & deleted:
            deleted |= fact.support
            steps.append((1, sorted(fact.support)))
    supporting = {t for f in facts for t in f.support}
    outside = [t.dia_id for t in conversation.turns if t.dia_id not in supporting]
    for turn in rng.sample(outside, min(per_kind, len(outside))):
        steps.append((2, [turn]))
    return steps


def random_vectors(rng: np.random.Generator, count: int, dim: int) -> list[list[float]]:
    vectors = rng.standard_normal((count, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows: list[list[float]] = vectors.tolist()
    return rows


@dataclass
class Built:
    ref: ConversationRef
    relations: dict[int, int]  # fact index -> relation id


def supplied_graph(conversation: locomo.Conversation, facts: list[Fact], tag: str, texts: dict[str, str]) -> SuppliedGraph:
    """The supplied extractions (see the module doc) over the marked turn ``texts``. Pure."""
    name, order = conversation.name, {t.dia_id: i for i, t in enumerate(conversation.turns)}
    graph = SuppliedGraph()
    for speaker in conversation.speakers:
        support = frozenset(t for f in facts if f.speaker == speaker for t in f.support)
        graph.entities[speaker] = SuppliedEntity(speaker, "person", support)
    for fact in facts:
        key = f"q{fact.index}"
        graph.entities[key] = SuppliedEntity(f"topic {marker(tag, 'n', name, key)}", "topic", fact.support)
        wordings = {t: f"{texts[t]} {marker(tag, 'f', name, key)}" for t in fact.support}
        first = wordings[min(fact.support, key=order.__getitem__)]
        graph.relations.append(SuppliedRelation(fact.speaker, key, "said", first, fact.support, wordings))
    for speaker in conversation.speakers:
        own = [f"q{f.index}" for f in facts if f.speaker == speaker]
        summary = f"{speaker}: " + ", ".join(marker(tag, "f", name, key) for key in own)
        graph.communities.append(SuppliedCommunity(speaker, summary, (speaker, *own)))
    return graph


async def build(
    memory: Memory, run: str, conversation: locomo.Conversation, facts: list[Fact], tag: str, rng: np.random.Generator
) -> Built:
    name = conversation.name
    messages = [
        replace(t.message, text=f"{t.message.text} {marker(tag, 'e', name, turn_key(t.dia_id))}") for t in conversation.turns
    ]
    graph = supplied_graph(conversation, facts, tag, {m.platform_message_id: m.text for m in messages})
    dim = memory.embedder.dim
    message_vectors = random_vectors(rng, len(messages), dim)
    vectors = iter(random_vectors(rng, len(graph.entities) + len(graph.relations) + len(graph.communities), dim))
    ref = ConversationRef("bench-forget", run, f"{name}-{tag}")
    ids = await load_supplied(memory, ref, messages, message_vectors, graph, vectors)
    return Built(ref, {f.index: relation for f, relation in zip(facts, ids.relations, strict=True)})


async def measure(memory: Memory, built: Built, facts: list[Fact], deleted: set[str]) -> dict[str, set[int]]:
    """Compare the store with the ground truth (a fact exists iff support is left): the
    records in each bad state, by id."""
    state = await integrity(memory, built.ref)
    supported = {built.relations[f.index] for f in facts if f.support - deleted}
    return {
        "unsupported_left": set(state.unsupported_relations),
        "supported_lost": supported - state.relations,
        "orphan_documents": set(state.orphan_documents),
    }


async def run_policy(
    memory: Memory, policy: ForgettingPolicy, run: str, conversations: list[locomo.Conversation], per_kind: int, seed: int
) -> dict[str, Any]:
    tag = TAGS[policy]
    by_kind = [{c: 0 for c in COLUMNS} for _ in KINDS]
    totals = {c: 0 for c in COLUMNS}
    expected_gone: set[str] = set()
    surviving_turns: set[str] = set()
    interventions = 0
    word_residue_found = words_checked = 0
    for conversation in conversations:
        facts = supplied_facts(conversation)
        steps = plan(conversation, facts, per_kind, random.Random(f"{seed}-{conversation.name}"))
        built = await build(memory, run, conversation, facts, tag, np.random.default_rng(seed))
        deleted: set[str] = set()
        seen: dict[str, set[int]] = {c: set() for c in COLUMNS}
        for kind, turns in steps:
            for turn in turns:
                if policy == "stashbird":
                    await forget(memory, built.ref, turn, principal=BENCH)
                else:
                    await forget_by_policy(memory, built.ref, turn, policy)
            deleted |= set(turns)
            interventions += 1
            current = await measure(memory, built, facts, deleted)
            for column in COLUMNS:  # each record counts once, for the intervention that did it
                by_kind[kind][column] += len(current[column] - seen[column])
                seen[column] |= current[column]
        for column in COLUMNS:
            totals[column] += len(seen[column])
        name = conversation.name
        expected_gone |= {marker(tag, "e", name, turn_key(t)) for t in deleted}
        expected_gone |= {marker(tag, k, name, f"q{f.index}") for f in facts if not f.support - deleted for k in ("f", "n")}
        surviving_turns |= {marker(tag, "e", name, turn_key(t.dia_id)) for t in conversation.turns if t.dia_id not in deleted}
        gone_texts = [
            f"{t.message.text} {marker(tag, 'e', name, turn_key(t.dia_id))}" for t in conversation.turns if t.dia_id in deleted
        ]
        scan = await word_residue(memory, built.ref, gone_texts, ignore=BENCH_WORDS)
        word_residue_found += len(scan.found)
        words_checked += len(scan.checked)
    found = set(await residue(memory, f"zq{tag}[a-z0-9]+"))
    return {
        "interventions": interventions,
        "by_kind": dict(zip(KINDS, by_kind, strict=True)),
        **totals,
        "residue": len(expected_gone & found),
        "residue_checked": len(expected_gone),
        "word_residue": word_residue_found,
        "words_checked": words_checked,
        "scan_saw_surviving_turns": f"{len(surviving_turns & found)}/{len(surviving_turns)}",
    }


# --- latency --------------------------------------------------------------------------


async def latency(memory: Memory, run: str, size: int, deletes: int, seed: int) -> dict[str, Any]:
    began = time.perf_counter()
    ref = ConversationRef("bench-forget", run, f"latency-{size}")
    await load_bulk_graph(memory, ref, size)
    load_seconds = time.perf_counter() - began
    picks = random.Random(seed).sample(range(size), min(deletes + 5, size))
    timings: list[float] = []
    removed = 0
    with progress(len(picks), f"delete at {size}") as bar:
        for index, pick in enumerate(picks):
            began = time.perf_counter()
            report = await forget(memory, ref, f"b{pick}", principal=BENCH)
            elapsed = (time.perf_counter() - began) * 1000
            if index >= 5:  # the first few warm up connections and plans
                timings.append(elapsed)
                removed += len(report.retraction.relations_removed)
            bar.update(1)
    return {
        "episodes": size,
        "load_seconds": round(load_seconds, 1),
        "deletes": len(timings),
        "relations_removed": removed,
        "median_ms": round(median(timings), 2),
        "p99_ms": round(percentile(timings, 0.99), 2),
        "load_average": round(os.getloadavg()[0], 1),  # the machine is shared: read the figures with it
    }


# --- a person -------------------------------------------------------------------------

PERSON = "u2"  # the bulk conversations' third speaker


def person_texts(size: int, count: int) -> dict[str, str]:
    """The person's messages in a bulk conversation, by platform id, oldest first, as
    lab.synthetic ``bulk_graph`` writes them. Pure."""
    every = size // count
    return {f"b{i}": f"bulk message about topic {i // 5} zqperson{i}" for i in range(0, size, every)}


async def person_forgetting(memory: Memory, run: str, size: int, count: int, sample: int, seed: int) -> dict[str, Any]:
    """Batched forgetting of ``count`` messages of one person in a ``size``-message
    conversation against deleting them one by one (see the module docstring)."""
    batched, single = (Workspace("bench-forget", f"{run}-{count}-{kind}") for kind in ("batched", "single"))
    began = time.perf_counter()
    for workspace in (batched, single):
        await load_bulk_graph(memory, ConversationRef(workspace.platform, workspace.workspace_id, "bulk"), size, count)
    load_seconds = (time.perf_counter() - began) / 2
    texts = person_texts(size, count)
    picks = list(texts) if len(texts) <= sample else random.Random(seed).sample(list(texts), sample)
    single_ref = ConversationRef(single.platform, single.workspace_id, "bulk")
    began = time.perf_counter()
    with progress(len(picks), f"one by one, {count} of {size}") as bar:
        for pick in picks:
            await forget(memory, single_ref, pick, principal=BENCH)
            bar.update(1)
    one_by_one = time.perf_counter() - began
    began = time.perf_counter()
    person = await forget_author(memory, PERSON, workspace=batched, principal=BENCH)
    batched_seconds = time.perf_counter() - began
    scan = await word_residue(memory, ConversationRef(batched.platform, batched.workspace_id, "bulk"), list(texts.values()))
    all_seconds = one_by_one * len(texts) / len(picks)
    return {
        "episodes": size,
        "person_messages": len(texts),
        "forgotten": person.messages,
        "remaining": person.remaining,
        "removed": person.removed,
        "kept": len(person.kept),
        "batched_seconds": round(batched_seconds, 1),
        "one_by_one_timed": len(picks),
        "one_by_one_seconds": round(all_seconds, 1),
        "one_by_one_extrapolated": len(picks) < len(texts),
        "one_by_one_ms_each": round(one_by_one * 1000 / len(picks), 1),
        "speedup": round(all_seconds / batched_seconds, 1) if batched_seconds else None,
        "word_residue": len(scan.found),
        "words_checked": len(scan.checked),
        "load_seconds": round(load_seconds, 1),
        "load_average": round(os.getloadavg()[0], 1),
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    if args.author:
        counts = [int(c) for c in str(args.author_counts).split(",") if c.strip()]
        if not counts or any(c <= 0 or c > args.size for c in counts):
            raise ValidationError("author-counts", f"each must be between 1 and --size ({args.size}), got {args.author_counts!r}")
        async with bench_memory(settings, "stashbird_bench_forget_author") as memory:
            await drop_vector_index(memory)
            rows = [await person_forgetting(memory, uuid.uuid4().hex[:6], args.size, c, args.sample, args.seed) for c in counts]
        return {"bench": "forget", "author": rows}
    conversations = load_locomo(args.locomo)
    run_id = uuid.uuid4().hex[:6]
    policies: dict[str, dict[str, Any]] = {}
    async with bench_memory(settings, "stashbird_bench_forget") as memory:
        for name in [p.strip() for p in str(args.policies).split(",") if p.strip()]:
            policy = next((p for p in TAGS if p == name), None)
            if policy is None:
                raise ValidationError("policies", f"unknown policy {name!r}; choose from {', '.join(TAGS)}")
            policies[policy] = await run_policy(memory, policy, run_id, conversations, args.per_kind, args.seed)
    sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    async with bench_memory(settings, "stashbird_bench_forget_latency") as memory:
        await drop_vector_index(memory)
        latencies = [await latency(memory, run_id, size, args.deletes, args.seed) for size in sizes]
    return {
        "bench": "forget",
        "conversations": len(conversations),
        "facts": sum(len(supplied_facts(c)) for c in conversations),
        "policies": policies,
        "latency": latencies,
    }


def render_author(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        how = (
            f"extrapolated from {row['one_by_one_timed']} timed deletions"
            if row["one_by_one_extrapolated"]
            else f"all {row['one_by_one_timed']} timed"
        )
        lines += [
            f"forget a person: {row['person_messages']} messages of one person in a {row['episodes']}-message conversation",
            f"  batched (forget_author): {row['batched_seconds']} s (target < 60 s); "
            f"{row['forgotten']} forgotten, {row['remaining']} remaining, {row['kept']} facts kept (others support them)",
            f"  one by one (forget per message): {row['one_by_one_seconds']} s, {row['one_by_one_ms_each']} ms each ({how}); "
            f"batched is {row['speedup']}x faster",
            "  removed: " + ", ".join(f"{count} {kind}" for kind, count in row["removed"].items() if count),
            f"  word residue after forgetting: {row['word_residue']} of {row['words_checked']} words only the person said "
            f"(each conversation loaded in {row['load_seconds']} s; load average {row['load_average']}, {os.cpu_count()} cores)",
        ]
    return "\n".join(lines)


def render(result: dict[str, Any]) -> str:
    if "author" in result:
        return render_author(result["author"])
    lines = [
        f"LoCoMo: {result['conversations']} conversations, {result['facts']} supplied facts",
        f"{'policy':<13} {'unsupported relations left':>27} {'supported relations lost':>25} "
        f"{'documents of removed records':>29} {'word residue':>13}  residue scan",
    ]
    for policy, row in result["policies"].items():
        residue = "clean" if row["residue"] == 0 else f"{row['residue']} traces"
        lines.append(
            f"{policy:<13} {row['unsupported_left']:>27} {row['supported_lost']:>25} {row['orphan_documents']:>29} "
            f"{row['word_residue']:>13}  {residue} (of {row['residue_checked']} deleted markers; "
            f"saw {row['scan_saw_surviving_turns']} surviving turns)"
        )
    if result["policies"]:
        checked = ", ".join(f"{p} {r['words_checked']}" for p, r in result["policies"].items())
        lines.append(f"word residue: words only deleted turns said, found in their conversation's rows (checked: {checked})")
    lines.append(
        "by intervention (interventions per policy: "
        + ", ".join(f"{p} {r['interventions']}" for p, r in result["policies"].items())
        + ")"
    )
    for kind in KINDS:
        cells = "; ".join(f"{p}: " + "/".join(str(r["by_kind"][kind][c]) for c in COLUMNS) for p, r in result["policies"].items())
        lines.append(f"  {kind:<42} {cells}")
    lines.append("  (unsupported left / supported lost / documents of removed records)")
    for row in result["latency"]:
        lines.append(
            f"deletion latency at {row['episodes']:>7} episodes: median {row['median_ms']} ms, p99 {row['p99_ms']} ms "
            f"over {row['deletes']} deletions ({row['relations_removed']} relations removed; loaded in {row['load_seconds']} s; "
            f"load average {row['load_average']} on {os.cpu_count()} cores) (target p99 < 50 ms)"
        )
    return "\n".join(lines)
