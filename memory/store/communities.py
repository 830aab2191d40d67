"""The writer of communities, their members and the conversation's community state: the
only module that inserts, updates or deletes ``communities``, ``community_members`` and
``community_state`` rows (tests/architecture/test_writers.py). memory.communities.run decides."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import DateTime, case, delete, func, insert, literal, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from memory.communities.use import BIRTH_USES, decayed_sql
from memory.store.database import custom_plans
from memory.store.locks import mark_due
from memory.store.schema import Community, CommunityMember, CommunityState

_NOTE_CHANGED = text(
    "UPDATE community_state s SET changed_entity_ids = ARRAY("
    "SELECT x FROM unnest(s.changed_entity_ids) AS x "
    "UNION SELECT subject_id FROM relations WHERE conversation_id = :c AND id = ANY(:ids) "
    "UNION SELECT object_id FROM relations WHERE conversation_id = :c AND id = ANY(:ids) ORDER BY 1) "
    "WHERE s.conversation_id = :c"
)


async def note_changed_relations(session: AsyncSession, conversation_id: int, relation_ids: Iterable[int]) -> None:
    """Before a deletion removes (or restores) these relations: their ends count as
    changed for the next rebuild threshold. Nothing to note before a first build."""
    ids = sorted(set(relation_ids))
    if ids:
        await session.execute(_NOTE_CHANGED, {"c": conversation_id, "ids": ids})


# Each community an answer's evidence came from: retrieved itself, or holding an entity
# the evidence showed (an entity item, a relation's end, an entity a shown message
# supports). Every subquery is pinned to the conversation, so Citus routes it to one shard.
_USED = (
    "conversation_id = :c AND (id = ANY(:communities) OR id IN ("
    "SELECT community_id FROM community_members WHERE conversation_id = :c AND ("
    "entity_id = ANY(:entities) "
    "OR entity_id IN (SELECT subject_id FROM relations WHERE conversation_id = :c AND id = ANY(:relations)) "
    "OR entity_id IN (SELECT object_id FROM relations WHERE conversation_id = :c AND id = ANY(:relations)) "
    "OR entity_id IN (SELECT entity_id FROM entity_provenance WHERE conversation_id = :c AND episode_id = ANY(:episodes)))))"
)
_RECORD_USE = text(
    f"UPDATE communities SET used_score = {decayed_sql('used_score', 'used_at', 'CAST(:now AS timestamptz)')} + 1, "
    f"used_at = CAST(:now AS timestamptz) WHERE {_USED}"
)
_DIRTY_USED = text(f"SELECT id FROM communities WHERE dirty AND {_USED} LIMIT 1")


async def record_use(
    session: AsyncSession,
    conversation_id: int,
    *,
    communities: Iterable[int] = (),
    entities: Iterable[int] = (),
    relations: Iterable[int] = (),
    episodes: Iterable[int] = (),
) -> None:
    """One use (memory/communities/use.py) of every community an answer's evidence came
    from, in the answer's own transaction. A dirty one among them (perhaps cold, which
    discovery passed over) marks the conversation due, so that its regeneration is
    looked at now; the mark comes first, as every writer takes the conversation's lock
    rows before its communities (no two transactions wait on each other in a circle)."""
    ids = {
        name: sorted(set(v))
        for name, v in (("communities", communities), ("entities", entities), ("relations", relations), ("episodes", episodes))
    }
    if not any(ids.values()):
        return
    values = {"c": conversation_id, "now": datetime.now(timezone.utc), **ids}
    # Planned with their values: run once an answer, the statements soon keep a generic
    # plan, which costs the conversation as an average one (in the largest of 1M
    # messages the two took 7.9 and 5.4 ms a question, 3.7 and 3.2 with their values).
    await custom_plans(session)
    if (await session.execute(_DIRTY_USED, values)).first() is not None:
        await mark_due(session, conversation_id)
    await session.execute(_RECORD_USE, values)


async def mark_dirty(session: AsyncSession, conversation_id: int, ids: Iterable[int], *, clear_summary: bool) -> None:
    """To be regenerated; ``clear_summary`` also clears label and summary (a deletion:
    they may quote the deleted message)."""
    now = literal(datetime.now(timezone.utc), DateTime(timezone=True))  # Citus refuses now() inside CASE here
    values: dict[str, Any] = {
        "dirty": True,
        "updated_at": case((Community.dirty, Community.updated_at), else_=now),  # dirty since
        **({"label": "", "summary": ""} if clear_summary else {}),
    }
    await session.execute(
        update(Community).where(Community.conversation_id == conversation_id, Community.id.in_(sorted(ids))).values(**values)
    )


async def delete_communities(session: AsyncSession, conversation_id: int, ids: Iterable[int]) -> None:
    """Their memberships go with them (ON DELETE CASCADE)."""
    await session.execute(delete(Community).where(Community.conversation_id == conversation_id, Community.id.in_(list(ids))))


async def create_community(session: AsyncSession, conversation_id: int, members: Iterable[int]) -> int:
    """A new dirty community of these entities (its summary comes from regeneration),
    made with one use (memory/communities/use.py: a new topic is summarised while new)."""
    made = {"conversation_id": conversation_id, "dirty": True, "used_score": BIRTH_USES, "used_at": datetime.now(timezone.utc)}
    community_id = (await session.execute(insert(Community).values(**made).returning(Community.id))).scalar_one()
    await add_members(session, conversation_id, [(community_id, e) for e in members])
    return int(community_id)


async def add_members(session: AsyncSession, conversation_id: int, pairs: Iterable[tuple[int, int]]) -> None:
    """(community, entity) memberships."""
    rows = [{"community_id": c, "entity_id": e, "conversation_id": conversation_id} for c, e in pairs]
    if rows:
        await session.execute(insert(CommunityMember), rows)


async def set_summary(session: AsyncSession, conversation_id: int, community_id: int, label: str, summary: str) -> None:
    """Regenerated: label and summary, no longer dirty."""
    await session.execute(
        update(Community)
        .where(Community.conversation_id == conversation_id, Community.id == community_id)
        .values(label=label, summary=summary, dirty=False, updated_at=func.now())
    )


async def save_state(
    session: AsyncSession, conversation_id: int, top_entity: int, top_relation: int, built: frozenset[int] | None
) -> None:
    """Record what a pass saw; ``built``: a full build's, with the changed entities it
    accounted for (those recorded since its read stay for the next threshold check)."""
    state = await session.get(CommunityState, conversation_id, with_for_update=True)
    if state is None:
        state = CommunityState(conversation_id=conversation_id, changed_entity_ids=[])
        session.add(state)
    if built is not None:
        state.built_at, state.built_entity_id, state.built_relation_id = func.now(), top_entity, top_relation
        state.changed_entity_ids = sorted(set(state.changed_entity_ids or ()) - built)
    state.seen_entity_id = max(state.seen_entity_id or 0, top_entity)
    state.seen_relation_id = max(state.seen_relation_id or 0, top_relation)
