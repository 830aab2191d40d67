"""Supporting messages as the audit shows them: speaker, time, platform id, link, text.

Only stored messages are read, so a deleted message cannot appear: its row is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.store.conversations import ConversationRef
from memory.store.schema import Episode, Speaker


@dataclass(frozen=True)
class MessageRef:
    platform_message_id: str
    speaker: str
    role: str  # user | admin | bot (a bot's message is context, never evidence)
    time: datetime
    text: str
    permalink: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "platform_message_id": self.platform_message_id,
            "speaker": self.speaker,
            "role": self.role,
            "time": self.time.isoformat(),
            "text": self.text,
            "permalink": self.permalink,
        }


def permalink(conversation: ConversationRef, platform_message_id: str) -> str | None:
    """A link to the message when its ids alone make one. Pure.

    Discord's message links are built from guild, channel and message ids. Slack's need
    the workspace's domain, which the ids do not give (its ``chat.getPermalink`` asks the
    platform), so Slack and local messages have none here."""
    if conversation.platform == "discord" and conversation.workspace_id and platform_message_id.isdigit():
        return f"https://discord.com/channels/{conversation.workspace_id}/{conversation.channel_id}/{platform_message_id}"
    return None


def message_columns() -> tuple[Any, ...]:
    return (Episode.platform_message_id, Speaker.display_name, Episode.role, Episode.message_time, Episode.text)


def message_ref(conversation: ConversationRef, row: Any) -> MessageRef:
    message_id, speaker, role, time, text = row
    return MessageRef(message_id, speaker, role, time, text, permalink(conversation, message_id))
