"""Opting out and a retention window, in one short scenario that the cluster suite runs
too (CLUSTER_MODULES): the statements of ``memory.ingest``'s opt-out check and of the
retention job's batches route to one shard like every other (tests/routing.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from memory import (
    ConversationRef,
    Memory,
    Principal,
    apply_retention,
    ingest,
    messages,
    set_optout,
    set_retention,
    validate_message,
)

TEST = Principal.operator("test")


async def test_an_opted_out_person_is_not_stored_and_a_one_day_window_forgets_exactly_the_older_message(
    memory: Memory,
) -> None:
    team, olive = f"T{uuid.uuid4().hex[:8].upper()}", f"U{uuid.uuid4().hex[:8].upper()}"
    ref = ConversationRef("slack", team, "C1")
    now = datetime.now(UTC)
    await set_optout(memory, olive, workspace=ref.workspace, opted_out=True, principal=TEST)

    def said(message_id: str, author: str, age: timedelta) -> dict[str, str]:
        return {"id": message_id, "author": author, "text": f"Note {message_id} by {author}.", "ts": (now - age).isoformat()}

    chat = [said("old", "ann", timedelta(days=2)), said("olive", olive, timedelta(hours=1)), said("new", "ann", timedelta(0))]
    report = await ingest(memory, ref, [validate_message(m) for m in chat], principal=TEST)
    assert (report.stored, report.opted_out) == (2, 1)
    await set_retention(memory, ref, 1, principal=TEST)
    run = await apply_retention(memory, ref, principal=Principal.job("retention"), now=now)
    assert (run.forgotten, run.batches, run.remaining) == (1, 1, 0)
    assert {str(m["message_id"]) for m in await messages(memory, ref, principal=TEST)} == {"new"}
