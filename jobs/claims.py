"""The scheduler's claims, as the scheduler itself: the core's claim commands
(memory/commands/claims.py) with the scheduler's principal."""

from __future__ import annotations

from typing import Any

from memory import Claim, Memory, Principal, claim_work, release_claim, renew_claim

SCHEDULER = Principal.job("scheduler")

__all__ = ["Claim", "claim", "release", "renew"]


async def claim(memory: Memory, conversation_id: int, job: str, owner: str, lease: float) -> Claim | None:
    """Take the item if no live lease holds it (see ``memory.claim_work``)."""
    return await claim_work(memory, conversation_id, job, owner, lease, principal=SCHEDULER)


async def renew(memory: Memory, held: Claim, lease: float) -> bool:
    """Extend the lease; False when it was lost."""
    return await renew_claim(memory, held, lease, principal=SCHEDULER)


async def release(memory: Memory, held: Claim, status: str, result: dict[str, Any]) -> None:
    """Record how the run ended and free the item."""
    await release_claim(memory, held, status, result, principal=SCHEDULER)
