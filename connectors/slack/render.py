"""Replies rendered as Slack mrkdwn. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from connectors.events import Reply


def escape(text: str) -> str:
    """Slack's three control characters, escaped in text we did not format ourselves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_reply(reply: Reply, permalinks: Mapping[str, str]) -> str:
    """The reply's text, then one linked source per cited message (label, speaker, day):
    the answer's ``[E3]`` labels point at them."""
    lines = [reply.text]
    sources = [
        f"<{permalinks[c.message_id]}|[{c.label}] {escape(c.speaker)}, {c.time:%d %b %Y}>"
        for c in reply.citations
        if c.message_id in permalinks
    ]
    if sources:
        lines.append("Sources: " + " · ".join(sources))
    if reply.answer_id is not None:
        lines.append(f"_answer {reply.answer_id}_")
    return "\n".join(lines)
