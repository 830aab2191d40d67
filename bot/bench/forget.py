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
"""

from __future__ import annotations

import argparse
import os
import random
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import BigInteger, DateTime, Integer, bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from bot import locomo
from bot.bench.common import (
    add_locomo_argument,
    bench_memory,
    load_locomo,
    median,
    percentile,
)
from bot.progress import progress
from bot.settings import Settings
from memory.core import Memory
from memory.episodes.append import append_messages
from memory.errors import ValidationError
from memory.forgetting.commands import apply_decision, delete_episode, remove_episode
from memory.forgetting.policies import whole_graph
from memory.forgetting.rules import POLICIES
from memory.graph.wording import FactWording
from memory.graph.writes import create_entity, create_relation
from memory.store.conversations import (
    ConversationRef,
    ensure_conversation,
    ensure_speaker,
)
from memory.store.documents import Document, upsert_documents
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.residue import find_tokens, find_words, surviving_texts, unique_words
from memory.store.schema import (
    Community,
    CommunityMember,
    Episode,
    Relation,
    RelationProvenance,
)

TAGS = {"stashbird": "s", "episode-only": "e", "cascade": "c"}
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
    conversation_id: int
    episodes: dict[str, int]  # dia id -> episode id
    relations: dict[int, int]  # fact index -> relation id


async def build(
    memory: Memory, run: str, conversation: locomo.Conversation, facts: list[Fact], tag: str, rng: np.random.Generator
) -> Built:
    name = conversation.name
    messages = [
        replace(t.message, text=f"{t.message.text} {marker(tag, 'e', name, turn_key(t.dia_id))}") for t in conversation.turns
    ]
    dim = memory.embedder.dim
    async with memory.sessions.begin() as session:
        cid = await ensure_conversation(session, ConversationRef("bench-forget", run, f"{name}-{tag}"))
        results = await append_messages(session, memory.embedder, cid, messages, random_vectors(rng, len(messages), dim))
        episodes = {
            m.platform_message_id: r.episode_id for m, r in zip(messages, results, strict=True) if r.episode_id is not None
        }
        texts = {m.platform_message_id: m.text for m in messages}
        vector = iter(random_vectors(rng, 3 * len(facts) + 4, dim))
        speakers: dict[str, int] = {}
        for speaker in conversation.speakers:
            support = {episodes[t] for f in facts if f.speaker == speaker for t in f.support}
            speakers[speaker] = await create_entity(
                session, cid, name=speaker, type_="person", summary="", embedding=next(vector), episode_ids=support
            )
        relations: dict[int, int] = {}
        for fact in facts:
            fact_support = [episodes[t] for t in fact.support]
            topic = await create_entity(
                session, cid, name=f"topic {marker(tag, 'n', name, f'q{fact.index}')}", type_="topic",
                summary="", embedding=next(vector), episode_ids=fact_support,
            )
            fact_vector = next(vector)
            wordings = {
                episodes[t]: FactWording(f"{texts[t]} {marker(tag, 'f', name, f'q{fact.index}')}", None,
                                         frozenset({episodes[t]}), fact_vector)
                for t in fact.support
            }
            first = wordings[min(wordings)]
            relations[fact.index] = await create_relation(
                session, cid, subject_id=speakers[fact.speaker], object_id=topic, predicate="said",
                fact=first.fact, embedding=fact_vector, episode_ids=fact_support, wordings=wordings,
            )
        await _communities(session, cid, facts, speakers, relations, tag, name, next(vector))
    return Built(cid, episodes, relations)


async def _communities(
    session: AsyncSession, cid: int, facts: list[Fact], speakers: dict[str, int], relations: dict[int, int],
    tag: str, name: str, vector: list[float],
) -> None:
    topics = dict(
        (await session.execute(select(Relation.id, Relation.object_id).where(Relation.conversation_id == cid))).all()
    )
    for speaker, entity_id in speakers.items():
        own = [f for f in facts if f.speaker == speaker]
        summary = f"{speaker}: " + ", ".join(marker(tag, "f", name, f"q{f.index}") for f in own)
        community = Community(conversation_id=cid, label=speaker, summary=summary, dirty=False)
        session.add(community)
        await session.flush()
        members = {entity_id} | {topics[relations[f.index]] for f in own}
        session.add_all([CommunityMember(community_id=community.id, entity_id=e, conversation_id=cid) for e in members])
        await upsert_documents(session, cid, [Document("community", community.id, summary, vector)])


# --- applying a policy ----------------------------------------------------------------



async def delete_with(memory: Memory, policy: str, cid: int, dia_id: str) -> None:
    if policy == "stashbird":
        await delete_episode(memory, cid, dia_id, principal="bench")
        return
    async with memory.sessions.begin() as session:
        await lock_conversation(session, cid, LockPurpose.CHAIN)
        await lock_conversation(session, cid, LockPurpose.GRAPH)
        episode = (
            await session.execute(select(Episode).where(Episode.conversation_id == cid, Episode.platform_message_id == dia_id))
        ).scalar_one()
        decision = POLICIES[policy](await whole_graph(session, cid), episode.id)
        await apply_decision(session, cid, decision)
        await remove_episode(session, cid, episode)


ORPHAN_DOCUMENTS = text(
    """
    SELECT d.id FROM search_documents d WHERE d.conversation_id = :cid AND CASE d.kind
      WHEN 'episode' THEN NOT EXISTS (SELECT 1 FROM episodes x WHERE x.id = d.ref_id)
      WHEN 'relation' THEN NOT EXISTS (SELECT 1 FROM relations x WHERE x.id = d.ref_id)
      WHEN 'entity' THEN NOT EXISTS (SELECT 1 FROM entities x WHERE x.id = d.ref_id AND NOT x.is_anchor)
      WHEN 'community' THEN NOT EXISTS (SELECT 1 FROM communities x WHERE x.id = d.ref_id AND NOT x.dirty)
    END
    """
)


async def measure(memory: Memory, built: Built, facts: list[Fact], deleted: set[str]) -> dict[str, set[int]]:
    """Compare the store with the ground truth (a fact exists iff support is left): the
    records in each bad state, by id."""
    cid = built.conversation_id
    async with memory.sessions() as session:
        present = set((await session.execute(select(Relation.id).where(Relation.conversation_id == cid))).scalars())
        unsupported = set(
            (
                await session.execute(
                    select(Relation.id).where(
                        Relation.conversation_id == cid, ~Relation.id.in_(select(RelationProvenance.relation_id))
                    )
                )
            ).scalars()
        )
        orphans = set((await session.execute(ORPHAN_DOCUMENTS, {"cid": cid})).scalars())
    supported = {built.relations[f.index] for f in facts if f.support - deleted}
    return {"unsupported_left": unsupported, "supported_lost": supported - present, "orphan_documents": orphans}


async def run_policy(
    memory: Memory, policy: str, run: str, conversations: list[locomo.Conversation], per_kind: int, seed: int
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
                await delete_with(memory, policy, built.conversation_id, turn)
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
        expected_gone |= {
            marker(tag, k, name, f"q{f.index}") for f in facts if not f.support - deleted for k in ("f", "n")
        }
        surviving_turns |= {marker(tag, "e", name, turn_key(t.dia_id)) for t in conversation.turns if t.dia_id not in deleted}
        gone_texts = [
            f"{t.message.text} {marker(tag, 'e', name, turn_key(t.dia_id))}" for t in conversation.turns if t.dia_id in deleted
        ]
        async with memory.sessions() as session:
            surviving = await surviving_texts(session, built.conversation_id)
            only_gone = unique_words(gone_texts, surviving, BENCH_WORDS)
            word_residue_found += len(await find_words(session, built.conversation_id, only_gone, surviving))
        words_checked += len(only_gone)
    async with memory.sessions() as session:
        found = set(await find_tokens(session, f"zq{tag}[a-z0-9]+"))
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


def _vector_sql(column: str, dim: int) -> str:
    """A random vector per row (the WHERE ties the subquery to the row so it is not run once)."""
    return f"ARRAY(SELECT random() - 0.5 FROM generate_series(1, {dim}) WHERE {column} IS NOT NULL)::vector"


async def bulk_conversation(memory: Memory, ref: ConversationRef, size: int) -> int:
    """One conversation of ``size`` episodes and a proportional graph, written by SQL on
    the server (with statistics refreshed between steps so that the joins hash instead of
    looping): a topic entity per 5 episodes, a relation per episode between topics
    (every third supported by two episodes), two speaker hubs supported by all their
    episodes with a relation to each topic, a community per 20 topics; search documents
    for all of them with random vectors."""
    dim = memory.embedder.dim
    topics = max(2, size // 5)
    vec = _vector_sql
    statements = [
        """INSERT INTO episodes (conversation_id, speaker_id, role, text, message_time, platform_message_id)
           SELECT :cid, CASE WHEN i % 2 = 0 THEN :s0 ELSE :s1 END, 'user',
                  'bulk message ' || i || ' about topic ' || (i / 5), :t0 + make_interval(secs => i), 'b' || i
           FROM generate_series(0, :n - 1) AS i""",
        """UPDATE episodes e SET prev_id = w.prev, next_id = w.next
           FROM (SELECT id, lag(id) OVER o AS prev, lead(id) OVER o AS next FROM episodes
                 WHERE conversation_id = :cid WINDOW o AS (ORDER BY message_time, id)) w
           WHERE e.conversation_id = :cid AND e.id = w.id""",
        "ANALYZE episodes",
        f"""INSERT INTO entities (conversation_id, name, type, summary, attributes, embedding)
           SELECT :cid, 'topic ' || t, 'topic', '', CAST('{{}}' AS jsonb), {vec("g.t", dim)}
           FROM generate_series(0, :topics - 1) AS g(t)
           UNION ALL SELECT :cid, display_name, 'person', '', CAST('{{}}' AS jsonb), {vec("s.id", dim)}
           FROM speakers s WHERE conversation_id = :cid""",
        "ANALYZE entities",
        """INSERT INTO entity_provenance (entity_id, episode_id, conversation_id, name, type)
           SELECT en.id, ep.id, :cid, en.name, en.type FROM episodes ep
           JOIN entities en ON en.conversation_id = :cid AND en.name = 'topic ' || (substr(ep.platform_message_id, 2)::int / 5)
           WHERE ep.conversation_id = :cid
           UNION ALL SELECT en.id, ep.id, :cid, en.name, en.type FROM episodes ep
           JOIN speakers sp ON sp.conversation_id = :cid AND sp.id = ep.speaker_id
           JOIN entities en ON en.conversation_id = :cid AND en.name = sp.display_name WHERE ep.conversation_id = :cid""",
        """INSERT INTO relations (conversation_id, subject_id, object_id, predicate, fact, status)
           SELECT :cid, s.id, o.id, 'relates_to', 'fact ' || i, 'active' FROM generate_series(0, :n - 1) AS i
           JOIN entities s ON s.conversation_id = :cid AND s.name = 'topic ' || (i / 5 % :topics)
           JOIN entities o ON o.conversation_id = :cid AND o.name = 'topic ' || ((i * 7 + 3) % :topics)
           UNION ALL SELECT :cid, h.id, t.id, 'mentions', 'mentions ' || g.t, 'active'
           FROM generate_series(0, :topics - 1) AS g(t)
           JOIN entities t ON t.conversation_id = :cid AND t.name = 'topic ' || g.t
           JOIN entities h ON h.conversation_id = :cid AND h.name = 'Speaker ' || (g.t % 2)""",
        "ANALYZE relations, entity_provenance",
        """INSERT INTO relation_provenance (relation_id, episode_id, conversation_id, fact, sources)
           SELECT r.id, ep.id, :cid, r.fact, ARRAY[ep.id] FROM relations r
           JOIN episodes ep ON ep.conversation_id = :cid AND ep.platform_message_id = 'b' || split_part(r.fact, ' ', 2)
           WHERE r.conversation_id = :cid AND r.predicate = 'relates_to'
           UNION ALL SELECT r.id, ep.id, :cid, r.fact, ARRAY[ep.id] FROM relations r
           JOIN episodes ep ON ep.conversation_id = :cid AND ep.platform_message_id = 'b' || (split_part(r.fact, ' ', 2)::int + 1)
           WHERE r.conversation_id = :cid AND r.predicate = 'relates_to' AND split_part(r.fact, ' ', 2)::int % 3 = 0
           UNION ALL SELECT r.id, p.episode_id, :cid, r.fact, ARRAY[p.episode_id] FROM relations r
           JOIN entity_provenance p ON p.conversation_id = :cid AND p.entity_id = r.object_id
           WHERE r.conversation_id = :cid AND r.predicate = 'mentions'""",
        """INSERT INTO communities (conversation_id, label, summary, dirty)
           SELECT :cid, 'community ' || c, 'community ' || c, false FROM generate_series(0, (:topics - 1) / 20) AS c""",
        "ANALYZE communities",
        """INSERT INTO community_members (community_id, entity_id, conversation_id)
           SELECT c.id, t.id, :cid FROM entities t
           JOIN communities c ON c.conversation_id = :cid AND c.label = 'community ' || (split_part(t.name, ' ', 2)::int / 20)
           WHERE t.conversation_id = :cid AND t.type = 'topic'""",
        f"""INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding, message_time)
           SELECT :cid, 'episode', e.id, 'Speaker: ' || e.text, {vec("e.id", dim)}, e.message_time
           FROM episodes e WHERE e.conversation_id = :cid
           UNION ALL SELECT :cid, 'entity', e.id, e.name, e.embedding, NULL FROM entities e WHERE e.conversation_id = :cid
           UNION ALL SELECT :cid, 'relation', r.id, r.fact, {vec("r.id", dim)}, NULL
           FROM relations r WHERE r.conversation_id = :cid
           UNION ALL SELECT :cid, 'community', c.id, c.summary, {vec("c.id", dim)}, NULL
           FROM communities c WHERE c.conversation_id = :cid""",
        # Each message's own vector, so that a deletion recomputes its successor's
        # exchange vector as it does in a real conversation (memory.episodes.exchange_vectors).
        """UPDATE episodes e SET embedding = d.embedding FROM search_documents d
           WHERE d.conversation_id = :cid AND d.kind = 'episode' AND d.ref_id = e.id AND e.conversation_id = :cid""",
    ]
    async with memory.sessions.begin() as session:
        cid = await ensure_conversation(session, ref)
        s0 = await ensure_speaker(session, cid, "u0", "Speaker 0", "user")
        s1 = await ensure_speaker(session, cid, "u1", "Speaker 1", "user")
        values = {"cid": cid, "s0": s0, "s1": s1, "n": size, "topics": topics, "t0": datetime(2026, 1, 1, tzinfo=timezone.utc)}
        types: dict[str, Any] = {
            "cid": BigInteger,
            "s0": BigInteger,
            "s1": BigInteger,
            "n": Integer,
            "topics": Integer,
            "t0": DateTime(timezone=True),
        }
        for statement in statements:
            typed = [bindparam(k, type_=t) for k, t in types.items() if f":{k}" in statement]
            await session.execute(text(statement).bindparams(*typed), values)
    async with memory.engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        for table in (
            "episodes",
            "entities",
            "entity_provenance",
            "relations",
            "relation_provenance",
            "community_members",
            "search_documents",
        ):
            await connection.execute(text(f"VACUUM ANALYZE {table}"))  # steady state: no autovacuum mid-run
    return cid


async def latency(memory: Memory, run: str, size: int, deletes: int, seed: int) -> dict[str, Any]:
    began = time.perf_counter()
    cid = await bulk_conversation(memory, ConversationRef("bench-forget", run, f"latency-{size}"), size)
    load_seconds = time.perf_counter() - began
    picks = random.Random(seed).sample(range(size), min(deletes + 5, size))
    timings: list[float] = []
    removed = 0
    with progress(len(picks), f"delete at {size}") as bar:
        for index, pick in enumerate(picks):
            began = time.perf_counter()
            report = await delete_episode(memory, cid, f"b{pick}", principal="bench")
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


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    conversations = load_locomo(args.locomo)
    run_id = uuid.uuid4().hex[:6]
    policies: dict[str, dict[str, Any]] = {}
    async with bench_memory(settings, "stashbird_bench_forget") as memory:
        for policy in [p.strip() for p in str(args.policies).split(",") if p.strip()]:
            if policy not in TAGS:
                raise ValidationError("policies", f"unknown policy {policy!r}; choose from {', '.join(TAGS)}")
            policies[policy] = await run_policy(memory, policy, run_id, conversations, args.per_kind, args.seed)
    sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    async with bench_memory(settings, "stashbird_bench_forget_latency") as memory:
        async with memory.engine.begin() as connection:
            await connection.execute(text("DROP INDEX IF EXISTS ix_search_documents_embedding"))
        latencies = [await latency(memory, run_id, size, args.deletes, args.seed) for size in sizes]
    return {
        "bench": "forget",
        "conversations": len(conversations),
        "facts": sum(len(supplied_facts(c)) for c in conversations),
        "policies": policies,
        "latency": latencies,
    }


def render(result: dict[str, Any]) -> str:
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
        cells = "; ".join(
            f"{p}: " + "/".join(str(r["by_kind"][kind][c]) for c in COLUMNS) for p, r in result["policies"].items()
        )
        lines.append(f"  {kind:<42} {cells}")
    lines.append("  (unsupported left / supported lost / documents of removed records)")
    for row in result["latency"]:
        lines.append(
            f"deletion latency at {row['episodes']:>7} episodes: median {row['median_ms']} ms, p99 {row['p99_ms']} ms "
            f"over {row['deletes']} deletions ({row['relations_removed']} relations removed; loaded in {row['load_seconds']} s; "
            f"load average {row['load_average']} on {os.cpu_count()} cores) (target p99 < 50 ms)"
        )
    return "\n".join(lines)
