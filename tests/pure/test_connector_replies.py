"""Replies shaped for a chat: the core's structured answer becomes the platform-neutral
Reply, and evidence labels in the answer line become source numbers. Pure."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from connectors.events import CitedMessage, Mention, Reply, ReplyTarget
from connectors.replies import answer_reply, numbered_line
from memory import Answer, AnswerReply, Citation, ConversationRef, QuotedMessage

REF = ConversationRef("discord", "1", "2")
WHEN = datetime(2026, 3, 1, tzinfo=UTC)
labels = st.from_regex(r"E[1-9][0-9]?(\.[1-9])?", fullmatch=True)


def reply(text: str, cited: list[str]) -> Reply:
    citations = tuple(CitedMessage(f"m{i}", "bob", WHEN, label) for i, label in enumerate(cited))
    return Reply(REF, ReplyTarget(), text, "answer", citations)


@given(
    st.lists(st.one_of(st.text(alphabet="ab .,", max_size=6), labels.map(lambda x: f"[{x}]")), max_size=8),
    st.lists(labels, max_size=4),
)
def test_labels_become_the_numbers_of_cited_sources_and_the_rest_are_dropped(parts: list[str], cited: list[str]) -> None:
    line = numbered_line(reply(" ".join(parts), cited))
    assert not re.search(r"\[E\d", line)
    for group in re.findall(r"\[([\d, ]+)\]", line):
        assert all(1 <= int(n) <= len(cited) for n in group.split(", "))


def test_a_label_names_its_first_citation_and_a_group_keeps_its_order() -> None:
    assert numbered_line(reply("Porto [E3.1] since May [E1; E3.1, E7].", ["E1", "E3.1", "E1"])) == "Porto [2] since May [1, 2]."
    assert numbered_line(reply("Nothing cited [E4]", [])) == "Nothing cited"


def test_the_reply_to_a_mention_is_the_cores_structured_answer() -> None:
    fixed = QuotedMessage("m3", "ann", WHEN, "It moved to Porto.")
    quoted = (QuotedMessage("m1", "bob", WHEN, "The offsite is in Lisbon.", outdated=True, correction=fixed),)
    answer = Answer(
        question="where?",
        question_date=WHEN,
        answer="Porto [E2]",
        in_memory=True,
        mode="llm",
        citations=[Citation("E2", 5, "m1", "bob", WHEN)],
        evidence=[],
        sub_queries=[],
        time_ranges=[],
        usage=[],
        trace_id=41,
        notes=["rerank unavailable (model error): kept the search order"],
        reply=AnswerReply("Porto [E2]", quoted, ("rerank unavailable (model error): kept the search order",)),
    )
    mention = Mention(REF, "q:create", None, "where?", ReplyTarget(message_id="q"))  # type: ignore[arg-type]
    shaped = answer_reply(mention, answer)
    assert shaped.text == "Porto [E2]" and shaped.answer_id == 41 and shaped.target.message_id == "q"
    assert shaped.citations == (CitedMessage("m1", "bob", WHEN, "E2", True, CitedMessage("m3", "ann", WHEN)),)
    assert shaped.citations[0].linked_ids() == ("m1", "m3")
    assert shaped.notes == ("rerank unavailable (model error): kept the search order",)
    assert numbered_line(shaped) == "Porto [1]"
