"""Pure rules of answering, summaries and LLM replies, tested without a database or a
server: citations, the offline summary, JSON reply parsing."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from memory.consolidation.summary import SummaryLine, offline_summary
from memory.models.json_reply import parse_reply
from memory.models.retry import Retryable
from memory.models.tokens import TokenBudget, count_tokens
from memory.retrieval.answering import cite
from memory.retrieval.evidence import EpisodeRef, EvidenceItem

T = datetime(2024, 5, 6, 9, tzinfo=timezone.utc)


def episode(n: int, speaker: str = "ann", role: str = "user") -> EpisodeRef:
    return EpisodeRef(n, f"m{n}", speaker, role, T, f"message {n}")


def item(
    label: str,
    kind: str = "episode",
    *,
    own: EpisodeRef | None = None,
    supporting: tuple[EpisodeRef, ...] = (),
    context: tuple[EpisodeRef, ...] = (),
    current: bool = True,
) -> EvidenceItem:
    return EvidenceItem(label, kind, 1, "text", 1.0, 0.9, 0.0, current, own, supporting, context)


@settings(deadline=None)  # the first example loads the tokenizer
@given(
    texts=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60), max_size=12),
    limit=st.integers(0, 120),
)
def test_a_token_budget_takes_what_counting_each_text_would(texts: list[str], limit: int) -> None:
    eager, left = [], limit
    for text in texts:
        cost = count_tokens(text)
        eager.append(cost <= left)
        left -= cost if cost <= left else 0
    budget = TokenBudget(limit)
    assert [budget.take(text) for text in texts] == eager


def test_a_token_budget_spent_within_its_bytes_never_counts() -> None:
    budget = TokenBudget(100)
    assert budget.take("a" * 60) and budget.take("b" * 40) and budget.left == 100  # taken, not counted yet
    assert budget.take("c" * 30)  # 100 bytes would overrun: counted now, and fits in tokens
    assert budget.left == 100 - count_tokens("a" * 60) - count_tokens("b" * 40) - count_tokens("c" * 30)


def test_citations_name_each_non_bot_message_once_in_citation_order() -> None:
    items = [
        item("E1", own=episode(1), context=(episode(7, "stashbird", "bot"), episode(8, "bob"))),
        item("E2", "relation", supporting=(episode(1), episode(2))),
    ]
    cited = cite(items, ["[E2]", "E1", "E1.2", "E1.1", "E9"])
    assert [(c.label, c.platform_message_id) for c in cited] == [("E2", "m1"), ("E2", "m2"), ("E1.2", "m8")]


def test_offline_summary_keeps_the_newest_lines_that_fit() -> None:
    lines = [SummaryLine(i, f"ann: line number {i} about the launch") for i in range(1, 7)]
    size = count_tokens(lines[0].text) + 1
    text, ids = offline_summary(lines, 3 * size)
    assert ids == [4, 5, 6] and text.split("\n") == [line.text for line in lines[3:]]
    assert offline_summary(lines, size - 1) == ("", [])


class Fact(BaseModel):
    subject: str
    count: int


def test_json_replies_are_parsed_or_refused_naming_what_is_wrong() -> None:
    assert parse_reply('{"subject": "Ana", "count": 2}', Fact) == Fact(subject="Ana", count=2)
    for reply, problem in (
        ("", "malformed JSON: empty reply"),
        ("{not json", "malformed JSON"),
        ('{"subject": "Ana"}', "schema errors (Fact): count: Field required"),
        ('{"subject": "Ana", "count": "many"}', "count: Input should be a valid integer"),
    ):
        with pytest.raises(Retryable) as refused:
            parse_reply(reply, Fact)
        assert problem in refused.value.cause
