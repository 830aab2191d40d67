"""Whether the bot is still in a conversation: the platform said it was removed from a
channel or a server (Slack ``channel_left``, Discord ``GUILD_DELETE``...), or added back.

While the bot is out, nothing new is stored there on any path (``memory.ingest`` checks
the mark, as it checks opt-outs): an event delivered late, a backfill or an import of
the channel is acknowledged and not stored, until the bot is added back. What was
stored before stays (the service may drop it too: STASHBIRD_ON_BOT_REMOVED=forget). The
mark is durable, in the conversation's row, so every process sees it at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.door import door
from memory.principal import Principal
from memory.store.conversations import bot_left_at, mark_bot_left

if TYPE_CHECKING:
    from memory.core import Memory
    from memory.store.conversations import ConversationRef


async def set_bot_present(memory: Memory, conversation: ConversationRef, present: bool, *, principal: Principal) -> bool:
    """Record that the bot was removed from the conversation (``present`` False: a
    conversation not in memory yet is created for the mark, so that nothing is stored
    there later) or added back; True when it changed."""
    async with door(
        memory, "set_bot_present", principal, conversation, create=not present, must_exist=False, arguments={"present": present}
    ) as call:
        changed = False
        if call.conversation_id is not None:
            async with memory._sessions.begin() as session:
                changed = await mark_bot_left(session, call.conversation_id, not present)
        call.note(present=present, changed=changed)
    return changed


async def bot_removed(memory: Memory, conversation_id: int) -> bool:
    """Whether the bot was removed from the conversation (ingest's check; the caller
    passed the door)."""
    async with memory._sessions() as session:
        return await bot_left_at(session, conversation_id) is not None
