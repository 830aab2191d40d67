"""The missed-deletion sweep cannot mass-delete by mistake: above a share of a channel's
checked messages missing in one pass, it forgets nothing there and says so."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from connectors.slack.sweep import sweep_slack_conversation
from connectors.sweep import SweepLimit, too_many_missing
from lab.standins.slack_standin import SlackStandIn
from memory import ConversationRef, Memory, Principal, ingest, messages, validate_message

TEST = Principal.operator("test")


@given(st.integers(0, 500), st.integers(0, 500), st.floats(0.01, 1.0), st.integers(1, 20))
def test_the_limit_refuses_exactly_more_than_the_share_and_at_least_the_minimum(
    checked: int, missing: int, share: float, least: int
) -> None:
    missing = min(missing, checked)
    refused = too_many_missing(checked, missing, SweepLimit(share, least))
    assert refused == (missing >= least and missing > share * checked)
    if refused:  # a pass that is refused would have forgotten a lot
        assert missing >= least
    assert not too_many_missing(checked, 0, SweepLimit(share, least))  # nothing missing: never refused


async def test_an_empty_history_that_answers_ok_forgets_nothing(memory: Memory) -> None:
    channel = f"CSW{uuid.uuid4().hex[:8].upper()}"
    async with SlackStandIn() as slack:
        ref = ConversationRef("slack", slack.team, channel)
        now = datetime.now(UTC)
        stored = []
        for n in range(10):
            message = slack.message(channel, "U1", f"Sweep note {n} on the roadmap.")
            stored.append(message["ts"])
            when = now - timedelta(minutes=10 - n)
            core = {"id": message["ts"], "author_id": "U1", "author_name": "Maya", "text": message["text"], "ts": when}
            await ingest(memory, ref, [validate_message(core)], principal=TEST)
        client = AsyncWebClient(token="xoxb-standin", base_url=slack.api_url)
        slack.channels[channel] = {}  # the channel exists; its history answers ok with no messages
        report = await sweep_slack_conversation(memory, client, ref, 7)
        assert report.refused and report.forgotten == [] and not report.dropped
        assert "10 of 10" in report.refused
        assert len(await messages(memory, ref, principal=TEST)) == 10
        # one real deletion among them is applied
        slack.channels[channel] = {
            ts: m for ts, m in ((t, {"type": "message", "user": "U1", "text": "x", "ts": t}) for t in stored[1:])
        }
        report = await sweep_slack_conversation(memory, client, ref, 7)
        assert report.refused is None and report.forgotten == [stored[0]]
        assert len(await messages(memory, ref, principal=TEST)) == 9
