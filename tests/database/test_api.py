"""The public API's own behaviour: commands are logged with their operation, conversation,
principal and duration (structured, in the log record), failures too."""

from __future__ import annotations

import logging

import pytest

from memory import ConversationRef, Memory, Principal, UnknownConversation, forget, ingest, validate_message

OPERATOR = Principal.operator("test")


async def test_commands_are_logged_with_conversation_operation_and_timing(
    memory: Memory, conversation_ref: ConversationRef, caplog: pytest.LogCaptureFixture
) -> None:
    message = validate_message({"id": "m1", "author": "ann", "text": "I adopted a cat.", "ts": "2026-01-01T10:00:00Z"})
    with caplog.at_level(logging.INFO, logger="memory"):
        report = await ingest(memory, conversation_ref, [message], principal=OPERATOR)
        await forget(memory, conversation_ref, "m1", principal=OPERATOR)
    records = {r.operation: r for r in caplog.records if hasattr(r, "operation")}  # type: ignore[attr-defined]
    assert set(records) >= {"ingest", "forget"}
    stored, deleted = records["ingest"], records["forget"]
    assert stored.conversation_id == deleted.conversation_id and stored.principal == "operator:test"  # type: ignore[attr-defined]
    assert stored.stored == report.stored == 1 and deleted.status == "deleted"  # type: ignore[attr-defined]
    assert stored.elapsed_ms >= 0 and deleted.elapsed_ms >= 0  # type: ignore[attr-defined]


async def test_an_unknown_conversation_is_refused_before_any_work(memory: Memory) -> None:
    with pytest.raises(UnknownConversation, match="no conversation 'test::nowhere' in memory"):
        await forget(memory, ConversationRef("test", "", "nowhere"), "m1", principal=OPERATOR)
