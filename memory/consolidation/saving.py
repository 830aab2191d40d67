"""Writing a consolidated chunk's graph: merge the resolved mentions into their entities
or create them, reconcile the chunk's relations against the active ones (pure rules,
memory.graph.reconcile) and write the outcome through memory.graph.writes, which
composes the writers of entities, relations, provenance and search documents. Inside
the chunk's transaction; this module writes nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from memory.consolidation.extraction import Chunk, ExtractedRelation
from memory.consolidation.mentions import Mention
from memory.consolidation.reading import relation_book
from memory.graph import writes as graph
from memory.graph.reconcile import FactDecision, NewFact, RelationBook, apply_relation, normalize_name
from memory.graph.wording import EntityWitness, FactWording
from memory.params import MemoryParams
from memory.store.schema import Entity

if TYPE_CHECKING:
    from memory.consolidation.run import ConsolidationReport


def _sort_mentions(
    mentions: Mapping[str, Mention], existing: set[int]
) -> tuple[dict[int, int | None], dict[int, list[EntityWitness]], list[tuple[str, Mention]], int]:
    """(merge targets deleted meanwhile, the support merged into each target, the mentions
    to create, how many merged). A mention whose target vanished is created instead;
    one left with no episode is not written (its ``entity_id`` cleared)."""
    vanished: dict[int, int | None] = {}
    support: dict[int, list[EntityWitness]] = {}
    created: list[tuple[str, Mention]] = []
    merged = 0
    for key, mention in mentions.items():
        if mention.decision == "merge" and mention.entity_id is not None and mention.entity_id not in existing:
            vanished[mention.entity_id] = None
            mention.decision = "new"
        if not mention.episodes:
            mention.entity_id = None
        elif mention.decision == "merge" and mention.entity_id is not None:
            support.setdefault(mention.entity_id, []).extend(mention.witnesses())
            merged += 1
        else:
            created.append((key, mention))
    return vanished, support, created, merged


async def write_entities(
    session: AsyncSession,
    conversation_id: int,
    mentions: dict[str, Mention],
    name_vectors: Mapping[str, Sequence[float]],
    doc_vectors: Mapping[str, Sequence[float]],
    report: ConsolidationReport,
) -> dict[int, int | None]:
    """Merge into or create the mentioned entities. Returns, for merge targets deleted
    meanwhile, the entity created instead (for the rolling context)."""
    targets = {m.entity_id for m in mentions.values() if m.decision == "merge"}
    existing = set(
        (
            await session.execute(
                select(Entity.id).where(Entity.conversation_id == conversation_id, Entity.id.in_(targets or {0}))
            )
        ).scalars()
    )
    vanished, support, created, merged = _sort_mentions(mentions, existing)
    report.entities_merged += merged
    await graph.add_entities_support(session, conversation_id, support)
    for key, mention in mentions.items():
        if mention.decision == "merge" and mention.entity_id is not None and mention.episodes and mention.summary:
            await graph.update_entity_summary(
                session,
                conversation_id,
                mention.entity_id,
                summary=mention.summary,
                document_embedding=doc_vectors[key],
                summary_episode_ids=mention.summary_episodes,
            )
    new_ids = await graph.create_entities(
        session,
        conversation_id,
        [
            graph.NewEntity(
                m.name,
                m.type,
                m.summary,
                name_vectors[key],
                m.witnesses(),
                doc_vectors[key],
                {"summary_episode_ids": sorted(m.summary_episodes)} if m.summary else {},
            )
            for key, m in created
        ],
    )
    for (_, mention), entity_id in zip(created, new_ids, strict=True):
        if mention.entity_id in vanished:
            vanished[mention.entity_id] = entity_id
        mention.entity_id = entity_id
    report.entities_created += len(created)
    return vanished


def new_facts(
    chunk: Chunk,
    relations: Sequence[ExtractedRelation],
    vectors: Sequence[Sequence[float]],
    mentions: Mapping[str, Mention],
    gone: set[int],
) -> list[tuple[NewFact, Sequence[float]]]:
    """The chunk's relations between written entities, with the episodes still there, as
    facts to reconcile (with their sentence vectors). Pure."""
    times = {line.episode_id: line.time for line in chunk.lines}
    facts: list[tuple[NewFact, Sequence[float]]] = []
    for relation, vector in zip(relations, vectors, strict=False):
        episodes = relation.episode_ids - gone
        subject = mentions[normalize_name(relation.subject)].entity_id
        obj = mentions[normalize_name(relation.object)].entity_id
        if not episodes or subject is None or obj is None:
            continue
        valid_from = relation.valid_from or min(times[e] for e in episodes)
        decision = cast(FactDecision, relation.decision) if relation.decision in ("new", "duplicate", "contradiction") else None
        facts.append(
            (NewFact(subject, obj, relation.predicate, relation.fact, frozenset(episodes), valid_from, decision), vector)
        )
    return facts


async def write_relations(
    session: AsyncSession,
    conversation_id: int,
    facts: Sequence[tuple[NewFact, Sequence[float]]],
    params: MemoryParams,
    reconcile: bool,
    report: ConsolidationReport,
) -> None:
    """Reconcile the facts against the active relations of their subjects (duplicate:
    more support; contradiction: supersede; else new) and write the outcome."""
    if not facts:
        return
    book = await relation_book(session, conversation_id, {fact.subject_id for fact, _ in facts}, reconcile)
    vector_of: dict[int, Sequence[float]] = {}
    wordings: dict[int, dict[int, FactWording]] = {}  # relation (book id) -> episode -> its wording
    for fact, vector in facts:
        outcome = apply_relation(book, fact, params, reconcile)
        if outcome.kind == "duplicate":
            assert outcome.target_id is not None
            target = outcome.target_id
            report.relations_duplicate += 1
        else:
            target = book.inserted[-1]
            vector_of[target] = vector
            report.relations_created += 1
            report.relations_superseded += outcome.kind == "contradiction"
        wording = FactWording(fact.fact, fact.valid_from, fact.episodes, vector)
        for episode in fact.episodes:
            wordings.setdefault(target, {}).setdefault(episode, wording)
    await _write_book(session, conversation_id, book, vector_of, wordings)


async def _write_book(
    session: AsyncSession,
    conversation_id: int,
    book: RelationBook,
    vector_of: Mapping[int, Sequence[float]],
    wordings: Mapping[int, Mapping[int, FactWording]],
) -> None:
    """Write what reconciliation decided: new relations, added support, supersessions
    (book ids of new relations mapped to their written ids)."""
    created = [book.relations[temp_id] for temp_id in book.inserted]
    ids = await graph.create_relations(
        session,
        conversation_id,
        [
            graph.NewRelation(
                state.subject_id,
                state.object_id,
                state.predicate,
                state.fact,
                vector_of[temp_id],
                wordings[temp_id],
                state.valid_from,
            )
            for temp_id, state in zip(book.inserted, created, strict=True)
        ],
    )
    real = dict(zip(book.inserted, ids, strict=True))
    await graph.add_relations_support(
        session,
        conversation_id,
        {relation_id: {e: wordings[relation_id][e] for e in added} for relation_id, added in book.supported.items()},
    )
    for old_id in book.superseded:
        old = book.relations[old_id]
        assert old.superseded_by is not None
        await graph.supersede_relation(
            session, conversation_id, real.get(old_id, old_id), real[old.superseded_by], old.invalid_at
        )
