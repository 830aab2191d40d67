"""The writer of answer traces and their evidence links: the only module that inserts,
updates or deletes ``answer_traces`` and ``answer_evidence`` rows (tests/architecture/test_writers.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import BigInteger, any_, cast, delete, insert, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession

from memory.store.schema import AnswerEvidence, AnswerTrace


async def store_trace(session: AsyncSession, conversation_id: int, trace: dict[str, Any], episode_ids: Sequence[int]) -> int:
    """One answer's trace (``trace``: its columns) and the episodes it used; returns its id."""
    trace_id = (
        await session.execute(insert(AnswerTrace).values(conversation_id=conversation_id, **trace).returning(AnswerTrace.id))
    ).scalar_one()
    if episode_ids:
        await session.execute(
            insert(AnswerEvidence).values(
                [{"trace_id": trace_id, "episode_id": e, "conversation_id": conversation_id} for e in episode_ids]
            )
        )
    return int(trace_id)


async def withdraw_answers(
    session: AsyncSession, conversation_id: int, episode_ids: Collection[int], replacement: str
) -> list[int]:
    """The answers that used one of the episodes may quote it: those evidence links go
    and their text becomes ``replacement``. Returns their trace ids."""
    episodes = cast(sorted(episode_ids), ARRAY(BigInteger))
    traces = sorted(
        set(
            (
                await session.execute(
                    delete(AnswerEvidence)
                    .where(AnswerEvidence.conversation_id == conversation_id, AnswerEvidence.episode_id == any_(episodes))
                    .returning(AnswerEvidence.trace_id)
                )
            ).scalars()
        )
    )
    if traces:
        await session.execute(
            update(AnswerTrace)
            .where(AnswerTrace.conversation_id == conversation_id, AnswerTrace.id.in_(traces))
            .values(answer=replacement)
        )
    return traces
