"""``stashbird demo`` end to end, as the quick start runs it (on the test database)."""

from __future__ import annotations

import json
import uuid

from tests.test_cli_ingest import stashbird


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
    assert "Biscuit" not in after["answer"]
    assert all(c["platform_message_id"] != "m13" for c in after["citations"])
