"""Replies shaped for any chat: the core's structured answer as the platform-neutral
``Reply`` (``answer_reply``), the answer line with its citation labels turned into
source numbers, and the numbered sources. Pure; each platform's renderer
(``connectors/slack/render.py``, ``connectors/discord/payloads.py``) only marks it up.

Why renumber: the answer model cites evidence labels (``[E3]``, ``[E3.1]``) that mean
nothing to a reader; a label of a cited message becomes that source's number (``[1]``),
and a label of something not cited (the model cited a fact, or a bot message, which is
never shown as a source) is dropped rather than left dangling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from connectors.events import CitedMessage, Mention, Reply
from memory import Answer, QuotedMessage

LABELS = re.compile(r"\s*\[(E\d+(?:\.\d+)*(?:\s*[,;]\s*E\d+(?:\.\d+)*)*)\]")


def numbered_line(reply: Reply) -> str:
    """The reply's text with each cited label as its source's number (1 = the first citation)."""
    numbers = {c.label: str(i) for i, c in reversed(list(enumerate(reply.citations, 1))) if c.label}

    def renumber(match: re.Match[str]) -> str:
        cited = [numbers[label] for label in re.split(r"\s*[,;]\s*", match.group(1)) if label in numbers]
        return f" [{', '.join(dict.fromkeys(cited))}]" if cited else ""

    return LABELS.sub(renumber, reply.text).strip()


def cited_message(quoted: QuotedMessage, labels: Mapping[str, str]) -> CitedMessage:
    """One message of the core's reply as the platform links it (its correction too). Pure."""
    correction = cited_message(quoted.correction, labels) if quoted.correction is not None else None
    return CitedMessage(
        quoted.platform_message_id,
        quoted.speaker,
        quoted.message_time,
        labels.get(quoted.platform_message_id, ""),
        quoted.outdated,
        correction,
    )


def answer_reply(event: Mention, answer: Answer) -> Reply:
    """The reply to a mention: the core's structured reply (the answer line, the cited
    messages with who said them and when, an outdated one with its correction, notes),
    with the evidence labels the line may use. Pure."""
    labels = {c.platform_message_id: c.label for c in answer.citations}
    citations = tuple(cited_message(quoted, labels) for quoted in answer.reply.messages)
    return Reply(event.conversation, event.reply, answer.reply.line, "answer", citations, answer.trace_id, answer.reply.notes)
