"""Integration: after ``stashbird erase`` a deleted message's marker is in no file of the
embedded server's table storage (``base/``), read as bytes; before it, the deleted row
version was still there (so the check can fail)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

from clirun import stashbird
from sqlalchemy import text

import memory as api
from memory.api import Principal
from memory.core import Memory
from memory.episodes.append import validate_message
from memory.store.conversations import ConversationRef

OPERATOR = Principal.operator("test")


def files_holding(root: Path, marker: bytes) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and marker in p.read_bytes()]


async def checkpoint(memory: Memory) -> None:
    """Write the shared buffers out, so the files show what the tables hold."""
    async with memory._engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("CHECKPOINT"))


async def test_erase_leaves_no_byte_of_a_deleted_message_in_the_table_files(
    memory: Memory, database_url: str, pg_data_dir: Path
) -> None:
    conversation_ref = ConversationRef.parse(f"erase-{uuid.uuid4().hex[:8]}")
    marker = f"zqerase{uuid.uuid4().hex[:10]}"
    when = datetime(2026, 3, 1, tzinfo=timezone.utc)
    message = validate_message({"id": "e1", "author": "Ann", "text": f"My locker code is {marker} tonight.", "ts": when})
    await api.ingest(memory, conversation_ref, [message], principal=OPERATOR)
    async with memory._engine.connect() as connection:  # the planner's statistics copy column values too
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("ANALYZE episodes"))
    assert (await api.forget(memory, conversation_ref, "e1", principal=OPERATOR)).status == "deleted"
    await checkpoint(memory)
    assert files_holding(pg_data_dir / "base", marker.encode()), "the dead row version should still be on disk"

    erased = stashbird(database_url, "erase", "--conversation", str(conversation_ref))
    assert erased.returncode == 0, erased.stderr
    assert "VACUUM FULL" in erased.stdout and "ACCESS EXCLUSIVE" in erased.stdout and "rewritten" in erased.stdout
    # The search documents' partitions (migration 0024) go through their table, named once.
    assert "search_documents " in erased.stdout and "search_documents_p" not in erased.stdout

    assert files_holding(pg_data_dir / "base", marker.encode()) == []
