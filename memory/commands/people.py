"""Commands about one person across a workspace's conversations: forgetting everything
they wrote (memory.privacy.person). A person may act on themselves (the access table's OWN
grant: ``owner`` is the person's platform id); a workspace's admins, platform events
(a member leaving) and jobs on anyone there; only the operator and configured admins
across the whole store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.door import door
from memory.principal import Principal
from memory.validation import normalize_id

if TYPE_CHECKING:
    from memory.core import Memory
    from memory.privacy.person import PersonForgetting
    from memory.store.conversations import Workspace


async def forget_author(
    memory: Memory, author: str, *, workspace: Workspace | None, principal: Principal, dry_run: bool = False
) -> PersonForgetting:
    """Forget every message ``author`` (a platform user id) wrote in ``workspace`` (None:
    every conversation of the store) and everything that rested only on them; facts
    others' messages support stay, re-worded from those. ``dry_run``: report what would
    go and change nothing. Rerun after an interruption to finish."""
    from memory.privacy.person import forget_person

    author = normalize_id(author, "author")
    arguments = {"author": author, "workspace": None if workspace is None else str(workspace), "dry_run": dry_run}
    async with door(memory, "forget_author", principal, everywhere=workspace is None, arguments=arguments, owner=author) as call:
        result = await forget_person(memory, author, workspace, principal=str(principal), dry_run=dry_run)
        call.note(messages=result.messages, conversations=result.conversations, remaining=result.remaining)
    return result
