"""Normalised chat events survive the inbox's JSON unchanged, and a payload that does
not fit is refused naming the field. Pure: no database."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.events import (
    AdminCommand,
    Author,
    ChannelDeleted,
    ChatMessage,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    MessagesDeleted,
    ReplyTarget,
    ThreadDeleted,
    decode,
    encode,
    message_of,
)
from memory import ConversationRef, ValidationError

REF = ConversationRef("slack", "T1", "C1")
ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
texts = st.text(max_size=40)
times = st.datetimes(timezones=st.just(UTC))
authors = st.builds(Author, ids, st.none() | texts, st.sampled_from([None, "user", "admin", "bot"]))
messages = st.builds(ChatMessage, ids, authors, texts, times, st.none() | ids, st.none() | ids)
targets = st.builds(
    ReplyTarget, st.none() | ids, st.none() | ids, st.none() | ids, st.booleans(), st.dictionaries(ids, texts, max_size=2)
)
events = st.one_of(
    st.builds(MessagePosted, st.just(REF), ids, messages),
    st.builds(MessageEdited, st.just(REF), ids, messages, st.none() | times),
    st.builds(MessageDeleted, st.just(REF), ids, ids),
    st.builds(MessagesDeleted, st.just(REF), ids, st.lists(ids, max_size=4).map(tuple)),
    st.builds(ThreadDeleted, st.just(REF), ids, ids),
    st.builds(ChannelDeleted, st.just(REF), ids),
    st.builds(Mention, st.just(REF), ids, messages, texts, targets),
    st.builds(AdminCommand, st.just(REF), ids, authors, texts, targets),
)


@given(events)
def test_an_event_survives_the_inbox_json(event) -> None:
    kind, payload = encode(event)
    stored = json.loads(json.dumps(payload))
    assert decode(REF, kind, stored) == event


def test_the_message_an_event_is_about() -> None:
    message = ChatMessage("m1", Author("U1"), "hi", datetime(2026, 1, 1, tzinfo=UTC))
    assert message_of(MessagePosted(REF, "e1", message)) == "m1"
    assert message_of(MessageDeleted(REF, "e2", "m2")) == "m2"
    assert message_of(ChannelDeleted(REF, "e3")) is None


@pytest.mark.parametrize(
    ("kind", "payload", "field"),
    [
        ("nonsense", {}, "kind"),
        ("delete", {"event_id": "e1"}, "delete"),
        ("delete", {"event_id": "e1", "message_id": 7}, "delete.message_id"),
        (
            "message",
            {"event_id": "e1", "message": {"id": "m", "author": {"id": "U"}, "text": "t", "time": "never"}},
            "message.message.time",
        ),
        ("bulk_delete", {"event_id": "e1", "message_ids": "m1"}, "bulk_delete.message_ids"),
    ],
)
def test_a_payload_that_does_not_fit_is_refused_naming_the_field(kind: str, payload: dict, field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        decode(REF, kind, payload)
    assert refused.value.field == field
