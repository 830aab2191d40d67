"""The scheduler's claims: work items shared between processes with leases, and the
run log (memory/store/claims.py holds the statements). Queues, not memory: jobs and the
operator may use them, none is audited (memory/access.py), and each names the item's
conversation id (0: work tied to no conversation) rather than a conversation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory.door import door
from memory.principal import Principal
from memory.store import claims as _claims

if TYPE_CHECKING:
    from memory.core import Memory
    from memory.store.claims import Claim, RunRecord


async def claim_work(
    memory: Memory, conversation_id: int, job: str, owner: str, lease: float, *, principal: Principal
) -> Claim | None:
    """Take the item if no live lease holds it (None when one does); runs of a dead
    holder are marked abandoned."""
    async with door(memory, "claim_work", principal) as call:
        held = await _claims.claim(memory._engine, conversation_id, job, owner, lease)
        call.note(conversation_id=conversation_id, job=job, claimed=held is not None)
    return held


async def renew_claim(memory: Memory, held: Claim, lease: float, *, principal: Principal) -> bool:
    """Extend the lease; False when it was lost (expired and taken by another process)."""
    async with door(memory, "renew_claim", principal) as call:
        kept = await _claims.renew(memory._engine, held, lease)
        call.note(conversation_id=held.conversation_id, job=held.job, kept=kept)
    return kept


async def release_claim(memory: Memory, held: Claim, status: str, result: dict[str, Any], *, principal: Principal) -> None:
    """Record how the run ended and free the item (only if this process still holds it)."""
    async with door(memory, "release_claim", principal) as call:
        await _claims.release(memory._engine, held, status, result)
        call.note(conversation_id=held.conversation_id, job=held.job, status=status)


async def last_runs(memory: Memory, conversation_ids: list[int], *, principal: Principal) -> dict[tuple[int, str], RunRecord]:
    """The newest run of each job for each of these conversations."""
    async with door(memory, "last_runs", principal):
        return await _claims.last_runs(memory._engine, conversation_ids)
