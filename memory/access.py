"""Who may do what: the access table every public command is checked against, one rule per command.

A principal (memory/principal.py) acts as one of these actors:

- ``operator``: the command line and the benchmarks, which hold the database anyway: everything.
- ``job``: a scheduled or service job (consolidation, communities, the missed-deletion
  sweep, backfill, vacuum, the chat service's inbox): background work and the changes a
  platform's history reports, never answers or audits.
- ``event``: a platform event (a message posted, edited or deleted, a channel deleted):
  stores, edits and forgets in its own conversation, and lists what is stored there.
- ``admin``: a platform user whose role in the conversation's workspace is ``admin`` (the
  connector passes the role the platform gives in that workspace), or a user id listed in
  STASHBIRD_ADMIN_IDS (``Memory.admin_ids``): asks, and audits the conversation. A command
  that reaches every conversation (``store_wide``) treats only configured ids as admins: a
  platform role is an admin of one workspace only.
- ``user``: any other platform user: asks.
- ``bot``: a platform bot: nothing (connectors never answer bots).

Each grant is ``ALL``, ``OWN`` or ``NONE``. ``OWN`` allows a principal to act on data that
is its own only (the caller names the owner: a person forgetting what they said, opting
out): ``set_optout``, ``optout_status`` and ``forget_author`` grant it to users, so a
person may opt out and forget what they said.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from memory.principal import Principal

Actor = Literal["operator", "job", "event", "admin", "user", "bot"]


class Grant(Enum):
    NONE = "none"
    OWN = "own"  # only data whose owner is the principal itself
    ALL = "all"


class Audit(Enum):
    """Where a command's audit row comes from."""

    NONE = "none"  # reveals and changes nothing of the memory (queues, cursors, counts)
    DOOR = "door"  # the door writes it once the command succeeded
    COMMAND = "command"  # the command writes it in its own transaction (forget, edit, drop_conversation)


@dataclass(frozen=True)
class Rule:
    """What each actor may do with one command, and how the command is audited."""

    grants: dict[Actor, Grant]
    audit: Audit = Audit.DOOR
    action: str | None = None  # the audit row's action; the operation's name by default
    store_wide: bool = False  # reaches every conversation: workspace admins are not enough

    def grant(self, actor: Actor) -> Grant:
        return Grant.ALL if actor == "operator" else self.grants.get(actor, Grant.NONE)

    def allowed(self) -> str:
        """Who may, in words (for the refusal's message)."""
        return ", ".join(["the operator", *(_WORDS[a] for a, g in self.grants.items() if g is not Grant.NONE)])


_WORDS: dict[Actor, str] = {
    "job": "a job",
    "event": "a platform event",
    "admin": "an admin of the conversation or a user in STASHBIRD_ADMIN_IDS",
    "user": "a platform user",
    "bot": "a bot",
    "operator": "the operator",
}

ALL = Grant.ALL
_CONTENT: dict[Actor, Grant] = {"event": ALL, "job": ALL}  # what a platform reports, in its own conversation
_WORK: dict[Actor, Grant] = {"job": ALL}  # background work
_AUDIT: dict[Actor, Grant] = {"admin": ALL}
_ASK: dict[Actor, Grant] = {"admin": ALL, "user": ALL}
_OPERATOR: dict[Actor, Grant] = {}


def _audit(*, store_wide: bool = False) -> Rule:
    return Rule(_AUDIT, Audit.DOOR, "audit", store_wide)


ACCESS: dict[str, Rule] = {
    # what the platform says: messages stored, edited, deleted, channels gone
    "ingest": Rule(_CONTENT),
    "forget": Rule(_CONTENT, Audit.COMMAND),
    "edit": Rule(_CONTENT, Audit.COMMAND),
    "drop_conversation": Rule(_CONTENT, Audit.COMMAND),  # to the store-wide log: the conversation's goes
    "stored_messages": Rule(_CONTENT, Audit.NONE),  # ids and times only, to compare with the platform
    "resolve_conversation": Rule(_CONTENT, Audit.NONE),
    "set_bot_present": Rule(_CONTENT),  # the bot removed from a channel or a server, or added back
    # a person: everything one platform user wrote in a workspace (themselves, its
    # admins, a leave event, a retention or clean-up job)
    "forget_author": Rule({"user": Grant.OWN, "admin": ALL, "event": ALL, "job": ALL}, Audit.COMMAND),
    # asking
    "ask": Rule(_ASK),
    # what participants decide: opting out (a workspace's, audited store-wide), retention
    "set_optout": Rule({"user": Grant.OWN, "admin": ALL}, Audit.COMMAND),
    "optout_status": Rule({"user": Grant.OWN, "admin": ALL}, Audit.NONE),
    "set_retention": Rule(_AUDIT),
    "retention": Rule(_ASK, Audit.NONE),
    "apply_retention": Rule(_WORK, action="retention"),
    "watch_retention_default": Rule(_WORK, Audit.NONE, store_wide=True),
    # the audit
    "about": _audit(),
    "explain": _audit(),
    "forgotten": _audit(),
    "provenance": _audit(),
    "stats": _audit(),
    "overview": _audit(),
    "facts": _audit(),
    "messages": _audit(),
    "list_communities": _audit(),
    "usage": Rule(_AUDIT, Audit.NONE),
    "audit_conversations": _audit(store_wide=True),
    "store_audit": _audit(store_wide=True),
    # background work
    "consolidate": Rule(_WORK),
    "pending": Rule(_WORK, Audit.NONE),
    "backlog": Rule(_WORK, Audit.NONE, store_wide=True),
    "due_backlog": Rule(_WORK, Audit.NONE, store_wide=True),
    "defer_backlog": Rule(_WORK, Audit.NONE, store_wide=True),
    "waiting_backlog": Rule(_WORK, Audit.NONE, store_wide=True),
    "build_communities": Rule(_WORK),
    "update_communities": Rule(_WORK),
    "regenerate_communities": Rule(_WORK),
    "regenerate_summary": Rule(_WORK),
    "vacuum": Rule(_WORK, store_wide=True),
    "index_conversation": Rule(_WORK, Audit.NONE),  # an index: no memory read or changed
    "conversations": Rule(_WORK, Audit.NONE, store_wide=True),
    "read_cursor": Rule(_WORK, Audit.NONE),
    "save_cursor": Rule(_WORK, Audit.NONE),
    "inbox_put": Rule(_WORK, Audit.NONE, store_wide=True),
    "inbox_conversations": Rule(_WORK, Audit.NONE, store_wide=True),
    "inbox_claim": Rule(_WORK, Audit.NONE),
    "inbox_backlog": Rule(_WORK, Audit.NONE, store_wide=True),
    "inbox_prune": Rule(_WORK, Audit.NONE, store_wide=True),
    "outbox_take": Rule(_WORK, Audit.NONE, store_wide=True),
    "outbox_settle": Rule(_WORK, Audit.NONE, store_wide=True),
    "claim_work": Rule(_WORK, Audit.NONE, store_wide=True),
    "renew_claim": Rule(_WORK, Audit.NONE, store_wide=True),
    "release_claim": Rule(_WORK, Audit.NONE, store_wide=True),
    "last_runs": Rule(_WORK, Audit.NONE, store_wide=True),
    # the operator's alone
    "erase": Rule(_OPERATOR),
    "reindex": Rule(_OPERATOR),
    "citus_plan": Rule(_OPERATOR, store_wide=True),
}


# A command's rule when it reaches every conversation of the store rather than one
# workspace (the door's ``everywhere``): a platform's admin role, a user's own id or an
# event of one workspace is not enough there.
EVERYWHERE: dict[str, Rule] = {
    "forget_author": Rule(_AUDIT, Audit.COMMAND, store_wide=True),
}


def actor(principal: Principal, admin_ids: frozenset[str], store_wide: bool = False) -> Actor:
    """Pure: the actor a principal is for a command (``store_wide``: one reaching every
    conversation, for which a platform's admin role does not count)."""
    if principal.kind != "user":
        return principal.kind
    if principal.id in admin_ids and principal.role != "bot":
        return "admin"
    if principal.role == "admin" and not store_wide:
        return "admin"
    return "bot" if principal.role == "bot" else "user"


def permits(rule: Rule, principal: Principal, admin_ids: frozenset[str], owner: str | None = None) -> bool:
    """Pure: whether ``principal`` may run a command of ``rule``; ``owner``: the platform
    id of the person whose data the command touches, when it touches one person's only."""
    grant = rule.grant(actor(principal, admin_ids, rule.store_wide))
    return grant is Grant.ALL or (grant is Grant.OWN and owner is not None and owner == principal.id)
