"""``stashbird jobs`` as a user runs it, on the test database: after a deletion the
community it touched has no search document until ``jobs run-once``, and its
regenerated summary holds nothing that rested only on the deleted message."""

from __future__ import annotations

import argparse
import json
import uuid

import pytest
from clirun import stashbird
from sqlalchemy import func, select

import memory as api
from bot.commands import jobs as jobs_command
from bot.settings import DatabaseSettings, Settings
from memory.core import Memory
from memory.store.conversations import ConversationRef
from memory.store.residue import find_tokens
from memory.store.schema import Checkpoint, Episode
from tests.database.test_communities import community_documents, members, two_groups

OPERATOR = api.Principal.operator("test")


@pytest.fixture
def conversation_ref() -> ConversationRef:
    """A local conversation, named on the command line as it is."""
    return ConversationRef("local", "", f"cli-jobs-{uuid.uuid4().hex[:8]}")


async def test_a_dirty_community_is_regenerated_by_run_once(
    memory: Memory, database_url: str, conversation_ref: ConversationRef, conversation_id: int
) -> None:
    marker = "qz" + uuid.uuid4().hex[:10]
    ids = await two_groups(memory, conversation_id, marker)
    async with memory._sessions.begin() as session:  # the hand-made graph stands for consolidation's
        top = (await session.execute(select(func.max(Episode.id)).where(Episode.conversation_id == conversation_id))).scalar_one()
        session.add(Checkpoint(conversation_id=conversation_id, last_episode_id=top))
    await api.build_communities(memory, conversation_ref, principal=OPERATOR)
    touched = next(c for c, m in (await members(memory, conversation_id)).items() if ids["ann"] in m)
    await api.forget(memory, conversation_ref, "m1", principal=OPERATOR)
    assert touched not in await community_documents(memory, conversation_id)

    # ``jobs status`` in this process (a second subprocess would double the test's time)
    args = argparse.Namespace(action="status", conversation=str(conversation_ref))
    status = await jobs_command.run(args, Settings(database=DatabaseSettings(url=database_url)))
    (row,) = status["conversations"]
    assert row["dirty_communities"] == 1 and row["unconsolidated_messages"] == 0
    assert "1 dirty communities" in jobs_command.render(status)

    once = stashbird(database_url, "jobs", "run-once", "--conversation", str(conversation_ref), "--json")
    assert once.returncode == 0, once.stderr
    jobs = {(item["job"], item["status"]) for item in json.loads(once.stdout)["items"]}
    assert ("community_regeneration", "ok") in jobs
    text = (await community_documents(memory, conversation_id))[touched]
    assert "Ann cooks with Bob" in text and marker not in text.lower()
    async with memory._sessions() as session:
        assert await find_tokens(session, marker) == {}
