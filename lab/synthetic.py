"""Synthetic loads for the benchmarks: records written as given, without extraction or
embedding, so that a benchmark measures one thing (deletion, search) on a known state.

- ``supply_graph``: messages with given vectors, and entities, relations and communities
  with given supports (the forgetting benchmark's supplied extractions);
- ``bulk_messages``: many messages and their search documents in batches of
  ``INSERT ... SELECT`` (the retrieval benchmark's latency conversation);
- ``bulk_graph``: a conversation of ``size`` messages and a proportional graph, written
  by SQL on the server (the forgetting benchmark's latency conversations).

Never used by the service: nothing here checks what it is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer, bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from memory.core import Memory
from memory.episodes.append import Message, append_messages
from memory.graph.wording import FactWording
from memory.graph.writes import create_entity, create_relation
from memory.store.conversations import ensure_speaker
from memory.store.documents import Document, upsert_documents
from memory.store.schema import Community, CommunityMember


@dataclass(frozen=True)
class SuppliedEntity:
    name: str
    type: str
    message_ids: frozenset[str]


@dataclass(frozen=True)
class SuppliedRelation:
    subject: str  # keys of SuppliedGraph.entities
    object: str
    predicate: str
    fact: str
    message_ids: frozenset[str]
    # Each supporting message's own wording of the fact, as an extractor reading that
    # message alone would give it (a message not named here words it as ``fact``).
    wordings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SuppliedCommunity:
    label: str
    summary: str
    members: tuple[str, ...]  # keys of SuppliedGraph.entities


@dataclass
class SuppliedGraph:
    """What an extractor would have found, stated directly. Records are written in the
    order given (entities, then relations, then communities)."""

    entities: dict[str, SuppliedEntity] = field(default_factory=dict)
    relations: list[SuppliedRelation] = field(default_factory=list)
    communities: list[SuppliedCommunity] = field(default_factory=list)


@dataclass(frozen=True)
class SuppliedIds:
    """The ids the supplied records were stored under (opaque handles, e.g. to compare
    with ``memory.integrity``)."""

    episodes: dict[str, int]  # platform message id -> episode id
    entities: dict[str, int]
    relations: list[int]  # in SuppliedGraph.relations order


async def supply_graph(
    memory: Memory,
    conversation_id: int,
    messages: Sequence[Message],
    message_vectors: Sequence[Sequence[float]],
    graph: SuppliedGraph,
    vectors: Iterator[Sequence[float]],
) -> SuppliedIds:
    """Store the messages with their given vectors and the graph with its supports, in
    one transaction; each entity, relation and community takes the next of ``vectors``."""
    async with memory._sessions.begin() as session:
        results = await append_messages(session, memory.embedder, conversation_id, messages, message_vectors)
        episodes = {r.platform_message_id: r.episode_id for r in results if r.episode_id is not None}
        entities: dict[str, int] = {}
        for key, entity in graph.entities.items():
            entities[key] = await create_entity(
                session,
                conversation_id,
                name=entity.name,
                type_=entity.type,
                summary="",
                embedding=next(vectors),
                episode_ids={episodes[m] for m in entity.message_ids},
            )
        relations = [
            await _supply_relation(session, conversation_id, r, entities, episodes, next(vectors)) for r in graph.relations
        ]
        for supplied in graph.communities:
            community = Community(conversation_id=conversation_id, label=supplied.label, summary=supplied.summary, dirty=False)
            session.add(community)
            await session.flush()
            members = {entities[key] for key in supplied.members}
            session.add_all(
                [CommunityMember(community_id=community.id, entity_id=e, conversation_id=conversation_id) for e in members]
            )
            document = Document("community", community.id, supplied.summary, next(vectors))
            await upsert_documents(session, conversation_id, [document])
    return SuppliedIds(episodes, entities, relations)


async def _supply_relation(
    session: AsyncSession,
    conversation_id: int,
    relation: SuppliedRelation,
    entities: dict[str, int],
    episodes: dict[str, int],
    vector: Sequence[float],
) -> int:
    """One relation; with ``wordings``, each supporting message says it in its own words
    (all sharing the relation's vector), else all of them said ``fact`` together."""
    support = {episodes[m] for m in relation.message_ids}
    wordings = {
        episodes[m]: FactWording(relation.wordings.get(m, relation.fact), None, frozenset({episodes[m]}), vector)
        for m in relation.message_ids
    }
    return await create_relation(
        session,
        conversation_id,
        subject_id=entities[relation.subject],
        object_id=entities[relation.object],
        predicate=relation.predicate,
        fact=relation.fact,
        embedding=vector,
        episode_ids=support,
        wordings=wordings if relation.wordings else None,
    )


def _vector_literal(vector: Iterable[float]) -> str:
    """A vector as the text a ``CAST(... AS halfvec)`` reads, five decimals a dimension. Pure."""
    return "[" + ",".join(f"{x:.5f}" for x in vector) + "]"


# Two statements, not one with the episodes' INSERT in a CTE, which Citus would not route.
_BULK_EPISODES = text(
    "INSERT INTO episodes (conversation_id, speaker_id, role, text, message_time, platform_message_id) "
    "SELECT :c, :s, 'user', body, timestamptz '2020-01-01' + n * interval '1 minute', 's' || n "
    "FROM unnest(CAST(:texts AS text[]), CAST(:numbers AS bigint[])) AS t(body, n) RETURNING id, platform_message_id"
)
_BULK_DOCUMENTS = text(
    "INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding, message_time, is_current) "
    "SELECT :c, 'episode', e.id, :prefix || e.text, CAST(t.vector AS halfvec), e.message_time, true "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:vectors AS text[])) AS t(id, vector) "
    "JOIN episodes e ON e.conversation_id = :c AND e.id = t.id"
)
_CHAIN_ALL = text(
    "UPDATE episodes e SET prev_id = c.prev, next_id = c.next FROM (SELECT id, "
    "lag(id) OVER (ORDER BY message_time, id) AS prev, lead(id) OVER (ORDER BY message_time, id) AS next "
    "FROM episodes WHERE conversation_id = :c) c WHERE e.conversation_id = :c AND e.id = c.id"
)


async def bulk_messages(
    memory: Memory, conversation_id: int, speaker: str, batches: Iterable[tuple[Sequence[str], Iterable[Iterable[float]]]]
) -> None:
    """Messages of one speaker a minute apart, numbered ``s0``, ``s1``..., each batch of
    (texts, vectors) in one statement; then the chain, and fresh planner statistics as
    autovacuum would gather after such a load."""
    async with memory._sessions.begin() as session:
        speaker_id = await ensure_speaker(session, conversation_id, "synthetic", speaker, "user")
    start = 0
    for texts, vectors in batches:
        async with memory._sessions.begin() as session:
            numbers = list(range(start, start + len(texts)))
            stored = await session.execute(
                _BULK_EPISODES, {"c": conversation_id, "s": speaker_id, "texts": list(texts), "numbers": numbers}
            )
            await session.execute(
                _BULK_DOCUMENTS,
                {
                    "c": conversation_id,
                    "prefix": f"{speaker}: ",
                    "ids": [i for _, i in sorted((int(m[1:]), i) for i, m in stored)],
                    "vectors": [_vector_literal(v) for v in vectors],
                },
            )
        start += len(texts)
    async with memory._engine.begin() as connection:
        await connection.execute(text("ANALYZE episodes"))  # see _bulk_graph_statements
        await connection.execute(_CHAIN_ALL, {"c": conversation_id})
    async with memory._engine.begin() as connection:
        await connection.execute(text("ANALYZE search_documents"))


def _random_vector_sql(column: str) -> str:
    """A random vector per row of ``:dim`` dimensions (the WHERE ties the subquery to the
    row so it is not run once)."""
    return f"ARRAY(SELECT random() - 0.5 FROM generate_series(1, :dim) WHERE {column} IS NOT NULL)::halfvec"


def _bulk_graph_statements() -> list[str]:
    vec = _random_vector_sql
    return [
        """INSERT INTO episodes (conversation_id, speaker_id, role, text, message_time, platform_message_id)
           SELECT :cid, CASE WHEN p THEN :s2 WHEN i % 2 = 0 THEN :s0 ELSE :s1 END, 'user',
                  CASE WHEN p THEN 'bulk message about topic ' || (i / 5) || ' zqperson' || i
                       ELSE 'bulk message ' || i || ' about topic ' || (i / 5) END,
                  :t0 + make_interval(secs => i), 'b' || i
           FROM generate_series(0, :n - 1) AS i, LATERAL (SELECT :every > 0 AND i % greatest(:every, 1) = 0 AS p) AS w""",
        # Statistics first: planned on an empty table's, the chain's self-join is a nested
        # loop over every pair of rows (minutes at 100,000 messages, not seconds).
        "ANALYZE episodes",
        """UPDATE episodes e SET prev_id = w.prev, next_id = w.next
           FROM (SELECT id, lag(id) OVER o AS prev, lead(id) OVER o AS next FROM episodes
                 WHERE conversation_id = :cid WINDOW o AS (ORDER BY message_time, id)) w
           WHERE e.conversation_id = :cid AND e.id = w.id""",
        f"""INSERT INTO entities (conversation_id, name, type, summary, attributes, embedding)
           SELECT :cid, 'topic ' || t, 'topic', '', CAST('{{}}' AS jsonb), {vec("g.t")}
           FROM generate_series(0, :topics - 1) AS g(t)
           UNION ALL SELECT :cid, display_name, 'person', '', CAST('{{}}' AS jsonb), {vec("s.id")}
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
           SELECT :cid, 'episode', e.id, 'Speaker: ' || e.text, {vec("e.id")}, e.message_time
           FROM episodes e WHERE e.conversation_id = :cid
           UNION ALL SELECT :cid, 'entity', e.id, e.name, e.embedding, NULL FROM entities e WHERE e.conversation_id = :cid
           UNION ALL SELECT :cid, 'relation', r.id, r.fact, {vec("r.id")}, NULL
           FROM relations r WHERE r.conversation_id = :cid
           UNION ALL SELECT :cid, 'community', c.id, c.summary, {vec("c.id")}, NULL
           FROM communities c WHERE c.conversation_id = :cid""",
        # Each message's own vector, so that a deletion recomputes its successor's
        # exchange vector as it does in a real conversation (memory.episodes.exchange_vectors).
        """UPDATE episodes e SET embedding = d.embedding FROM search_documents d
           WHERE d.conversation_id = :cid AND d.kind = 'episode' AND d.ref_id = e.id AND e.conversation_id = :cid""",
    ]


_BULK_TYPES: dict[str, Any] = {
    "cid": BigInteger,
    "s0": BigInteger,
    "s1": BigInteger,
    "s2": BigInteger,
    "every": Integer,
    "n": Integer,
    "topics": Integer,
    "dim": Integer,
    "t0": DateTime(timezone=True),
}
_VACUUMED = (
    "episodes",
    "entities",
    "entity_provenance",
    "relations",
    "relation_provenance",
    "community_members",
    "search_documents",
)


async def bulk_graph(memory: Memory, conversation_id: int, size: int, person: int = 0) -> None:
    """``size`` messages (``b0``, ``b1``...) and a proportional graph, written by SQL on
    the server (with statistics refreshed between steps so that the joins hash instead of
    looping): a topic entity per 5 messages, a relation per message between topics
    (every third supported by two messages), two speaker hubs supported by all their
    messages with a relation to each topic, a community per 20 topics; search documents
    for all of them with random vectors. ``person``: that many of the messages, spread
    evenly, are a third speaker's (``u2``, "Speaker 2", with an entity they alone
    support), each ending in a marker word only they say (``zqperson<i>``), for the
    person-forgetting benchmark. Vacuumed at the end: a steady state, with no
    autovacuum mid-run."""
    async with memory._sessions.begin() as session:
        s0 = await ensure_speaker(session, conversation_id, "u0", "Speaker 0", "user")
        s1 = await ensure_speaker(session, conversation_id, "u1", "Speaker 1", "user")
        s2 = await ensure_speaker(session, conversation_id, "u2", "Speaker 2", "user") if person else s0
        values = {
            "cid": conversation_id,
            "s0": s0,
            "s1": s1,
            "s2": s2,
            "every": size // person if person else 0,
            "n": size,
            "topics": max(2, size // 5),
            "dim": memory.embedder.dim,
            "t0": datetime(2026, 1, 1, tzinfo=UTC),
        }
        for statement in _bulk_graph_statements():
            typed = [bindparam(k, type_=t) for k, t in _BULK_TYPES.items() if f":{k}" in statement]
            await session.execute(text(statement).bindparams(*typed), values)
    async with memory._engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        for table in _VACUUMED:
            await connection.execute(text(f'VACUUM ANALYZE "{table}"'))


# The number a bulk row's key starts with (``b17``, ``topic 3``, ``fact 3 links...``), NULL for a
# row the bulk load did not write (a message from the real ingest path, a speaker).
def _number(column: str, prefix: str) -> str:
    return f"(CASE WHEN {column} ~ '^{prefix}[0-9]+( |$)' THEN substring({column} FROM '^{prefix}([0-9]+)')::int END)"


_GROWTH = (
    "SELECT g.cid, g.start, g.n, (g.start + 4) / 5 AS t0, (g.start + g.n - 1) / 5 AS t1, "
    "s0.id AS s0, s1.id AS s1 FROM unnest(CAST(:cids AS bigint[]), CAST(:starts AS int[]), CAST(:counts AS int[])) "
    "AS g(cid, start, n) JOIN speakers s0 ON s0.conversation_id = g.cid AND s0.platform_user_id = 'u0' "
    "JOIN speakers s1 ON s1.conversation_id = g.cid AND s1.platform_user_id = 'u1' WHERE g.n > 0"
)


_POOL = 4_000  # random vectors drawn per statement without word vectors


def _pooled(key: str, alias: str) -> tuple[str, str]:
    """(joins, expression): a vector for the row of ``key`` (a bigint), the sum of two
    of the statement's pool (``:npool`` vectors) picked by it; joins rather than a
    sub-select, which Citus cannot plan in an INSERT ... SELECT through the coordinator."""
    joins = f"JOIN pool {alias}a ON {alias}a.k = ({key}) % :npool JOIN pool {alias}b ON {alias}b.k = ({key}) / :npool % :npool"
    return joins, f"{alias}a.v + {alias}b.v"


# The keys of a message's four words (``_word``): its text, and with word vectors its
# vector. Linear in i alone they would repeat every vocabulary's length of messages (a
# conversation of 134K messages held each text 33 times); i's quotient by that length
# makes the period its square.
_WORD_KEYS = (
    "i * 7919 + g.cid",
    "i * 104729 + i / (:l * :l * :l) * 613 + 3 * g.cid",
    "i * 31 + i / (:l * :l * :l) * 7 + 17 * g.cid",
    "i * 613 + i / (:l * :l * :l) * 104729 + 5 * g.cid",
)


def _worded() -> tuple[str, str]:
    """(joins, expression): a message's vector as the sum of its four words' vectors
    (the pool holds the vocabulary's, in ``_word``'s order)."""
    joins = " ".join(f"JOIN pool w{n} ON w{n}.k = ({key}) % (:l * :l * :l)" for n, key in enumerate(_WORD_KEYS))
    return joins, " + ".join(f"w{n}.v" for n in range(len(_WORD_KEYS)))


def _word(key: str) -> str:
    """The word of ``key`` (a number): three of ``:syllables`` (``s``, ``:l`` of them), so
    that a row looks up a short array (subscripting a long text array walks it)."""
    x = f"(({key}) % (:l * :l * :l))"
    return f"(s[1 + {x} / (:l * :l)] || s[1 + {x} / :l % :l] || s[1 + {x} % :l])"


def _grow_statements(worded: bool) -> list[str]:
    """Messages ``start`` .. ``start + n - 1`` of every conversation grown and their share
    of a graph (see ``grow_conversations``), one statement per table for all of them;
    ``worded``: the pool is the vocabulary's vectors (``:pool``), else random."""
    word = _word
    episode = _number("ep.platform_message_id", "b")
    topic = _number("e.name", "topic ")
    fact = _number("r.fact", "fact ")
    grown = f"WITH g AS MATERIALIZED ({_GROWTH}) "
    pool = (
        "pool AS MATERIALIZED (SELECT t.k - 1 AS k, CAST(t.v AS halfvec) AS v "
        "FROM unnest(CAST(:pool AS text[])) WITH ORDINALITY AS t(v, k)) "
        if worded
        else "pool AS MATERIALIZED (SELECT k, ARRAY(SELECT random() - 0.5 FROM generate_series(1, :dim) "
        "WHERE k IS NOT NULL)::halfvec AS v FROM generate_series(0, :npool - 1) AS k) "
    )
    with_pool = f"{grown[:-1]}, {pool}"
    ep_join, ep_vec = _worded() if worded else _pooled("g.cid * 1000003 + i", "p")
    topic_join, topic_vec = _pooled("g.cid * 1000003 + t * 5 + 1", "p")
    person_join, person_vec = _pooled("s.id * 7 + 2", "q")
    relation_join, relation_vec = _pooled("r.id * 11 + 3", "p")
    community_join, community_vec = _pooled("c.id * 13 + 4", "q")
    return [
        # Each row written once, with its id and its links among the new rows, as the
        # ingest path writes a message (memory.episodes.append): an UPDATE of every row
        # after would leave a dead copy of each (half the table's bytes, vector and all).
        f"""{with_pool}, fresh AS MATERIALIZED (
             SELECT n.*, nextval(pg_get_serial_sequence('episodes', 'id')) AS id FROM (
               -- i is a bigint: i * 104729 overflows an int in a conversation past 20,000 messages
               SELECT g.cid, g.s0, g.s1, i FROM g
               CROSS JOIN LATERAL generate_series(CAST(g.start AS bigint), g.start + g.n - 1) AS i ORDER BY g.cid, i) AS n),
           chained AS MATERIALIZED (
             SELECT f.*, lag(f.id) OVER w AS prev, lead(f.id) OVER w AS next FROM fresh f
             WINDOW w AS (PARTITION BY f.cid ORDER BY f.i))
           INSERT INTO episodes
             (conversation_id, id, speaker_id, role, text, message_time, platform_message_id, embedding, prev_id, next_id)
           SELECT g.cid, g.id, CASE WHEN i % 2 = 0 THEN g.s0 ELSE g.s1 END, 'user',
                  'about ' || {word(_WORD_KEYS[0])} || ' and ' || {word(_WORD_KEYS[1])}
                  || ' with ' || {word(_WORD_KEYS[2])} || ' ' || {word(_WORD_KEYS[3])},
                  :t0time + make_interval(secs => i * 60), 'b' || i, {ep_vec}, g.prev, g.next
           FROM chained g CROSS JOIN (SELECT CAST(:syllables AS text[]) AS s) AS v {ep_join}""",
        "ANALYZE episodes",  # see _bulk_graph_statements
        # The links across the new rows' edges: the chain's old tail (and a message
        # ingested after it), and the first and last new rows; a few rows per conversation.
        """UPDATE episodes e SET prev_id = w.prev, next_id = w.next
           FROM (SELECT conversation_id, id, lag(id) OVER o AS prev, lead(id) OVER o AS next FROM episodes
                 WHERE conversation_id = ANY(CAST(:cids AS bigint[]))
                 WINDOW o AS (PARTITION BY conversation_id ORDER BY message_time, id)) w
           WHERE e.conversation_id = w.conversation_id AND e.id = w.id
             AND (e.prev_id IS DISTINCT FROM w.prev OR e.next_id IS DISTINCT FROM w.next)""",
        f"""{with_pool}INSERT INTO entities (conversation_id, name, type, summary, attributes, embedding)
           SELECT g.cid, 'topic ' || t, 'topic', '', CAST('{{}}' AS jsonb), {topic_vec}
           FROM g CROSS JOIN LATERAL generate_series(g.t0, g.t1) AS t {topic_join}
           UNION ALL SELECT s.conversation_id, s.display_name, 'person', '', CAST('{{}}' AS jsonb), {person_vec}
           FROM g JOIN speakers s ON s.conversation_id = g.cid AND s.id IN (g.s0, g.s1) {person_join} WHERE g.start = 0""",
        "ANALYZE episodes, entities",
        f"""{grown}INSERT INTO entity_provenance (entity_id, episode_id, conversation_id, name, type)
           SELECT e.id, ep.id, g.cid, e.name, e.type FROM g
           JOIN episodes ep ON ep.conversation_id = g.cid AND {episode} >= g.start
           JOIN entities e ON e.conversation_id = g.cid AND e.name = 'topic ' || ({episode} / 5)
           UNION ALL SELECT e.id, ep.id, g.cid, e.name, e.type FROM g
           JOIN episodes ep ON ep.conversation_id = g.cid AND {episode} >= g.start
           JOIN speakers sp ON sp.conversation_id = g.cid AND sp.id = ep.speaker_id
           JOIN entities e ON e.conversation_id = g.cid AND e.name = sp.display_name AND e.type = 'person'""",
        f"""{grown}INSERT INTO relations (conversation_id, subject_id, object_id, predicate, fact, status)
           SELECT g.cid, s.id, o.id, 'relates_to', 'fact ' || t || ' links ' || s.name || ' to ' || o.name, 'active'
           FROM g CROSS JOIN LATERAL generate_series(g.t0, g.t1) AS t
           JOIN entities s ON s.conversation_id = g.cid AND s.name = 'topic ' || t
           JOIN entities o ON o.conversation_id = g.cid AND o.name = 'topic ' || ((t * 7 + 3) % (g.t1 + 1))""",
        "ANALYZE relations",
        f"""{grown}INSERT INTO relation_provenance (relation_id, episode_id, conversation_id, fact, sources)
           SELECT r.id, ep.id, g.cid, r.fact, ARRAY[ep.id] FROM g
           JOIN episodes ep ON ep.conversation_id = g.cid AND {episode} >= g.start
           JOIN relations r ON r.conversation_id = g.cid AND r.predicate = 'relates_to' AND {fact} = {episode} / 5""",
        f"""{grown}INSERT INTO communities (conversation_id, label, summary, dirty)
           SELECT g.cid, 'community ' || c, 'community of topics ' || (c * 20) || ' to ' || (c * 20 + 19), false
           FROM g CROSS JOIN LATERAL generate_series((g.t0 + 19) / 20, g.t1 / 20) AS c""",
        "ANALYZE communities",
        f"""{grown}INSERT INTO community_members (community_id, entity_id, conversation_id)
           SELECT c.id, e.id, g.cid FROM g
           JOIN entities e ON e.conversation_id = g.cid AND {topic} >= g.t0
           JOIN communities c ON c.conversation_id = g.cid AND c.label = 'community ' || ({topic} / 20)""",
        f"""{with_pool}INSERT INTO search_documents (conversation_id, kind, ref_id, text, embedding, message_time)
           SELECT g.cid, 'episode', ep.id, ep.text, ep.embedding, ep.message_time FROM g
           JOIN episodes ep ON ep.conversation_id = g.cid AND {episode} >= g.start
           UNION ALL SELECT g.cid, 'entity', e.id, e.name, e.embedding, NULL FROM g
           JOIN entities e ON e.conversation_id = g.cid AND ({topic} >= g.t0 OR (e.type = 'person' AND g.start = 0))
           UNION ALL SELECT g.cid, 'relation', r.id, r.fact, {relation_vec}, NULL FROM g
           JOIN relations r ON r.conversation_id = g.cid AND {fact} >= g.t0 {relation_join}
           UNION ALL SELECT g.cid, 'community', c.id, c.summary, {community_vec}, NULL FROM g
           JOIN communities c ON c.conversation_id = g.cid AND {_number("c.label", "community ")} >= (g.t0 + 19) / 20
           {community_join}""",
        "INSERT INTO checkpoints (conversation_id, last_episode_id) SELECT conversation_id, max(id) FROM episodes "
        "WHERE conversation_id = ANY(CAST(:cids AS bigint[])) GROUP BY conversation_id "
        "ON CONFLICT (conversation_id) DO UPDATE SET last_episode_id = excluded.last_episode_id",
    ]


_GROW_TYPES: dict[str, Any] = {"dim": Integer, "l": Integer, "npool": Integer, "t0time": DateTime(timezone=True)}


async def grow_conversations(
    memory: Memory,
    growth: Sequence[tuple[int, int, int]],
    syllables: Sequence[str],
    word_vectors: Sequence[Sequence[float]] | None = None,
) -> None:
    """For each (conversation id, start, count): messages ``b<start>`` ..
    ``b<start + count - 1>`` (a minute apart, two speakers, four words of three
    ``syllables`` each) and their share of a graph, written by SQL on the server, one
    statement per table for all the conversations, checkpointed as consolidated: a
    topic entity per 5 messages supported by them, a relation per topic to another topic
    supported by the same messages, an entity per speaker supported by all their
    messages, a community per 20 topics; search documents for all of them. Called again
    with the next starts, the conversations grow. Vacuum is left to the caller.

    Vectors: with ``word_vectors`` (the embedder's, of every word of ``syllables`` in
    ``_word``'s order) a message's is the sum of its words' and any other row's the sum
    of two words', so that what is near a question about a word is what holds it, as in a
    real store; without, random."""
    if word_vectors is not None and len(word_vectors) != len(syllables) ** 3:
        raise ValueError(f"word_vectors: one per word of the syllables ({len(syllables) ** 3}), got {len(word_vectors)}")
    growth = [g for g in growth if g[2] > 0]
    if not growth:
        return
    async with memory._sessions.begin() as session:
        for conversation_id, _, _ in growth:
            await ensure_speaker(session, conversation_id, "u0", "Speaker 0", "user")
            await ensure_speaker(session, conversation_id, "u1", "Speaker 1", "user")
        values = {
            "cids": [g[0] for g in growth],
            "starts": [g[1] for g in growth],
            "counts": [g[2] for g in growth],
            "dim": memory.embedder.dim,
            "syllables": list(syllables),
            "l": len(syllables),
            "npool": _POOL if word_vectors is None else len(word_vectors),
            "t0time": datetime(2026, 1, 1, tzinfo=UTC),
        }
        if word_vectors is not None:
            values["pool"] = [_vector_literal(v) for v in word_vectors]
        # Joins on computed keys over whole conversations: hashed, never looped row by row.
        await session.execute(text("SET LOCAL enable_nestloop = off"))
        # Under Citus one statement's rows for all conversations pass through the
        # coordinator: past 1 GB (the default cap) the 100K-to-1M step was refused.
        await session.execute(text("SELECT set_config('citus.max_intermediate_result_size', '-1', true)"))
        for statement in _grow_statements(word_vectors is not None):
            typed = [bindparam(k, type_=t) for k, t in _GROW_TYPES.items() if re.search(rf":{k}\b", statement)]
            await session.execute(text(f"/* multi-shard: bench-scale */ {statement}").bindparams(*typed), values)


async def vacuum_analyze(memory: Memory) -> None:
    """VACUUM ANALYZE the tables a bulk load writes: a steady state, no autovacuum mid-run."""
    async with memory._engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        for table in (*_VACUUMED, "communities"):
            await connection.execute(text(f'VACUUM ANALYZE "{table}"'))
