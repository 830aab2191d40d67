"""Replies rendered as Slack mrkdwn. Pure.

An answer is its line, then one bullet per cited message: who said it and when, the
time a Slack date token (shown in each reader's own time zone and format, with a plain
UTC fallback for clients that cannot) linking to the message's permalink; an outdated
message says so and links the message that corrected it. Notes (a model call that
failed) and the answer's number (for ``/memory why``) close it, in italics.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from connectors.events import CitedMessage, Reply
from connectors.replies import numbered_line


def escape(text: str) -> str:
    """Slack's three control characters, escaped in text we did not format ourselves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def date_token(moment: datetime, link: str | None) -> str:
    """``<!date^…>``: the time in the reader's zone, linking to ``link`` when there is one."""
    fallback = f"{moment:%d %b %Y %H:%M} UTC"
    target = f"^{link}" if link else ""
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}{target}|{fallback}>"


def source_line(number: int, cited: CitedMessage, permalinks: Mapping[str, str]) -> str:
    line = f"{number}. *{escape(cited.speaker)}*, {date_token(cited.time, permalinks.get(cited.message_id))}"
    fixed = cited.correction
    if fixed is not None:
        line += f" (outdated; corrected by *{escape(fixed.speaker)}*, {date_token(fixed.time, permalinks.get(fixed.message_id))})"
    elif cited.outdated:
        line += " (outdated)"
    return line


def render_reply(reply: Reply, permalinks: Mapping[str, str]) -> str:
    """The reply as one mrkdwn message; ``permalinks`` maps message ids to their permalinks."""
    lines = [escape(numbered_line(reply))]
    lines += [source_line(i, cited, permalinks) for i, cited in enumerate(reply.citations, 1)]
    lines += [f"_note: {escape(note)}_" for note in reply.notes]
    if reply.answer_id is not None:
        lines.append(f"_answer {reply.answer_id}_")
    return "\n".join(lines)
