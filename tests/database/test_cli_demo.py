"""``stashbird demo`` end to end, as the quick start runs it (on the test database)."""

from __future__ import annotations

import json
import uuid

from clirun import stashbird

from memory.retrieval.answering import NOT_IN_MEMORY


def test_demo_remembers_answers_and_forgets(database_url: str) -> None:
    conversation = f"demo-{uuid.uuid4().hex[:6]}"
    runs = [stashbird(database_url, "demo", "--conversation", conversation, "--json") for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (json.loads(run.stdout) for run in runs)

    assert first["ingested"] == second["ingested"] == 16  # each run starts the conversation afresh
    assert any("Biscuit" in f["fact"] and f["messages"] == ["m13"] for f in first["facts"])
    dog = first["answers"][2]
    assert dog["citations"][0]["platform_message_id"] == "m13"
    assert "Biscuit" in dog["answer"]

    assert first["deletion"]["status"] == "deleted"
    assert first["deletion"]["counts"]["relations_removed"] >= 1
    after = first["answer_after_deletion"]
    # The only message that said it is gone, and Alice's "Biscuit is adorable" does not
    # say whose dog it is: not in memory, rather than a quote of something near it.
    assert after["in_memory"] is False and after["answer"] == NOT_IN_MEMORY
    assert after["citations"] == [] and after["reply"]["messages"] == []
    assert [f["fact"] for f in first["facts"] if f["messages"] == ["m4"]] == ["Marco sits on the fourth floor"]
