"""Replies shaped for any chat: the answer line with its citation labels turned into
source numbers, and the numbered sources. Pure; each platform's renderer
(``connectors/slack/render.py``, ``connectors/discord/payloads.py``) only marks it up.

Why renumber: the answer model cites evidence labels (``[E3]``, ``[E3.1]``) that mean
nothing to a reader; a label of a cited message becomes that source's number (``[1]``),
and a label of something not cited (the model cited a fact, or a bot message, which is
never shown as a source) is dropped rather than left dangling.
"""

from __future__ import annotations

import re

from connectors.events import Reply

LABELS = re.compile(r"\s*\[(E\d+(?:\.\d+)*(?:\s*[,;]\s*E\d+(?:\.\d+)*)*)\]")


def numbered_line(reply: Reply) -> str:
    """The reply's text with each cited label as its source's number (1 = the first citation)."""
    numbers = {c.label: str(i) for i, c in reversed(list(enumerate(reply.citations, 1))) if c.label}

    def renumber(match: re.Match[str]) -> str:
        cited = [numbers[label] for label in re.split(r"\s*[,;]\s*", match.group(1)) if label in numbers]
        return f" [{', '.join(dict.fromkeys(cited))}]" if cited else ""

    return LABELS.sub(renumber, reply.text).strip()
