"""Forgetting a person: every message one platform user wrote, in every conversation of
a workspace (a Slack team, a Discord guild) or of the whole store, through the batched
Algorithm 1 (memory.forgetting.batch), one conversation at a time.

What goes: their messages, with their search documents, and everything that rested
only on them (relations, entities, community summaries, the running summary, rolling
context, answers that cited them), then their speaker row (their display name) once no
message of theirs is left. What stays: facts that others' messages still support,
re-worded from those messages, and others' messages, including those that quote or
name the person: they are the others' words.

First every message of theirs in scope is hidden, in one short transaction
(``hide_episodes``: search documents, chain, tombstones, which keep a stored message
out of any answer's evidence), so no answer anywhere draws on them from then on; then
each conversation is forgotten as one batch (one transaction), so an ask sees its
derived records before or after, never half-changed. Interrupted, what is done stays
done and the rest stays hidden; running it again finds the person's remaining messages
(and speaker rows) and finishes: ``remaining`` counts what is still stored when it
returns (a message that arrived meanwhile, say).

A dry run plans each conversation's batch in a read-only snapshot that is rolled back
(the same loader and rules as the deletion, as ``audit provenance`` does for one
message) and reports what would go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import BigInteger, all_, any_, cast, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.core import Memory
from memory.errors import ValidationError
from memory.forgetting.batch import BatchReport, forget_episodes, hide_episodes
from memory.forgetting.plan import Retraction, documents_to_remove, plan_retractions
from memory.store.audit import write_audit, write_store_audit
from memory.store.conversations import ConversationRef, Workspace, drop_speaker
from memory.store.locks import LockPurpose, lock_conversation
from memory.store.schema import (
    Conversation,
    Entity,
    EntityProvenance,
    Episode,
    Relation,
    RelationProvenance,
    Speaker,
)

SHOWN = 10  # kept facts listed in a report; the rest are counted


@dataclass(frozen=True)
class PersonFact:
    """A fact or name the person's messages supported: one that stays because others'
    messages still support it, or (a dry run's) one that would go."""

    conversation: str
    kind: str  # relation | entity
    text: str  # as it reads (a kept one re-worded from the others' messages when needed)
    others: int  # messages of others that support it (0 for one that goes)


@dataclass
class PersonForgetting:
    """What forgetting a person removed (or, in a dry run, would remove) and kept."""

    author: str
    workspace: Workspace | None  # None: every conversation of the store
    dry_run: bool
    messages: int = 0  # forgotten (or would be)
    conversations: int = 0  # holding a message or speaker row of theirs
    removed: dict[str, int] = field(default_factory=dict)
    kept: list[PersonFact] = field(default_factory=list)
    gone: list[PersonFact] = field(default_factory=list)  # a dry run's: the facts and names that would go
    message_ids: dict[str, list[str]] = field(default_factory=dict)  # conversation -> platform ids, oldest first
    remaining: int = 0  # their messages still stored afterwards: 0 when complete (a dry run: all)

    @property
    def scope(self) -> str:
        return "every conversation" if self.workspace is None else f"workspace {self.workspace}"

    def lines(self) -> list[str]:
        """The report the CLI and the chat commands show: what was removed, by kind, and
        what stays and why."""
        if not self.messages and not self.removed.get("speakers"):
            return [f"Nothing to forget: no message by {self.author} is stored in {self.scope}."]
        verb = "Would forget" if self.dry_run else "Forgot"
        head = f"{verb} {self.messages} message(s) by {self.author} in {self.conversations} conversation(s) of {self.scope}."
        gone = ", ".join(f"{count} {kind}" for kind, count in self.removed.items() if count)
        out = [head]
        if self.dry_run:  # exactly what would go, message by message
            out += [f"  {conversation}: {', '.join(ids)}" for conversation, ids in self.message_ids.items() if ids]
        out.append(f"{'Would remove' if self.dry_run else 'Removed'}: {gone or 'nothing else'}.")
        out += [f"  {fact.kind} {fact.text!r}" for fact in self.gone[:SHOWN]]
        if len(self.gone) > SHOWN:
            out.append(f"  ... and {len(self.gone) - SHOWN} more")
        if self.kept:
            out.append(f"{'Would stay' if self.dry_run else 'Kept'}, because others' messages still support them:")
            out += [f"  {fact.kind} {fact.text!r} ({fact.others} message(s) of others)" for fact in self.kept[:SHOWN]]
            if len(self.kept) > SHOWN:
                out.append(f"  ... and {len(self.kept) - SHOWN} more")
        out.append("Others' messages stay, including those that quote or name them: they are the others' words.")
        if self.remaining and not self.dry_run:
            out.append(f"{self.remaining} message(s) by {self.author} are still stored: run it again to finish.")
        return out

    def render(self) -> str:
        return "\n".join(self.lines())

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "workspace": None if self.workspace is None else str(self.workspace), "lines": self.lines()}


def removed_counts(retraction: Retraction, messages: int, speakers: int, summaries: int) -> dict[str, int]:
    """A retraction's removals by kind, in words a report can show. Pure."""
    return {
        "messages": messages,
        "relations": len(retraction.relations_removed),
        "entities": len(retraction.entities_removed),
        "entities kept only as nameless anchors": len(retraction.entities_anchored),
        "community summaries (rebuilt from what stays)": len(retraction.communities_dirtied),
        "running summaries (rebuilt from what stays)": summaries,
        "rolling-context entries": retraction.context_entries_dropped,
        "answers withdrawn": len(retraction.answers_withdrawn),
        "search documents": retraction.documents_removed,
        "speakers": speakers,
    }


@dataclass(frozen=True)
class _Scope:
    conversation_id: int
    ref: ConversationRef
    episodes: tuple[int, ...]


async def _scopes(session: AsyncSession, author: str, workspace: Workspace | None) -> list[_Scope]:
    """The conversations in scope holding a speaker row of the author, with their
    messages, oldest first; refuses a workspace the store holds no conversation of. One
    query per conversation, each naming it (so each routes to one shard under Citus)."""
    conversations = select(Conversation.id, Conversation.platform, Conversation.workspace_id, Conversation.channel_id)
    if workspace is not None:
        conversations = conversations.where(
            Conversation.platform == workspace.platform, Conversation.workspace_id == workspace.workspace_id
        )
    found = (await session.execute(conversations.order_by(Conversation.id))).all()
    if workspace is not None and not found:
        raise ValidationError("workspace", f"no conversation of workspace {str(workspace)!r} in memory")
    scopes = []
    for cid, platform, workspace_id, channel in found:
        speaker = (
            await session.execute(select(Speaker.id).where(Speaker.conversation_id == cid, Speaker.platform_user_id == author))
        ).scalar_one_or_none()
        if speaker is None:
            continue
        episodes = await session.execute(
            select(Episode.id)
            .where(Episode.conversation_id == cid, Episode.speaker_id == speaker)
            .order_by(Episode.message_time, Episode.id)
        )
        scopes.append(_Scope(cid, ConversationRef(platform, workspace_id, channel), tuple(episodes.scalars())))
    return scopes


async def _facts(
    session: AsyncSession, scope: _Scope, relations: Sequence[int], entities: Sequence[int], gone: Sequence[int]
) -> list[PersonFact]:
    """These records as they read now, with how many messages beyond ``gone`` support them."""
    out: list[PersonFact] = []
    episodes = cast(sorted(gone), ARRAY(BigInteger))
    for kind, model, label, link, owner, ids in (
        ("relation", Relation, Relation.fact, RelationProvenance, "relation_id", relations),
        ("entity", Entity, Entity.name, EntityProvenance, "entity_id", entities),
    ):
        if not ids:
            continue
        other: Any = aliased(link)
        others = (
            select(func.count())
            .where(
                other.conversation_id == scope.conversation_id,
                getattr(other, owner) == model.id,
                other.episode_id != all_(episodes),
            )
            .scalar_subquery()
        )
        rows = await session.execute(
            select(label, others)
            .where(model.conversation_id == scope.conversation_id, model.id == any_(cast(sorted(ids), ARRAY(BigInteger))))
            .order_by(label)
        )
        out += [PersonFact(str(scope.ref), kind, fact, int(count)) for fact, count in rows]
    return out


async def _dry_run(memory: Memory, scope: _Scope) -> tuple[Retraction, list[PersonFact], list[PersonFact], list[str]]:
    """The batch's plan, its kept and gone facts and the messages' platform ids."""
    async with memory._sessions() as session:  # never committed: the dry run writes nothing
        await session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        plan = await plan_retractions(session, scope.conversation_id, scope.episodes, for_update=False)
        retraction = plan.retraction()
        retraction.documents_removed = await documents_to_remove(session, scope.conversation_id, plan.decision, scope.episodes)
        kept = await _facts(session, scope, retraction.relations_kept, retraction.entities_kept, scope.episodes)
        gone = await _facts(session, scope, retraction.relations_removed, retraction.entities_removed, scope.episodes)
        ids = dict(
            (
                await session.execute(
                    select(Episode.id, Episode.platform_message_id).where(
                        Episode.conversation_id == scope.conversation_id,
                        Episode.id == any_(cast(list(scope.episodes), ARRAY(BigInteger))),
                    )
                )
            ).all()
        )
        return retraction, kept, gone, [ids[e] for e in scope.episodes]


async def _forget(memory: Memory, scope: _Scope, author: str, principal: str) -> tuple[BatchReport, bool, list[PersonFact]]:
    report = await forget_episodes(
        memory, scope.conversation_id, scope.episodes, principal=principal, action="forget_author", audit={"author": author}
    )
    async with memory._sessions.begin() as session:
        await lock_conversation(session, scope.conversation_id, LockPurpose.CHAIN)
        speaker_gone = await drop_speaker(session, scope.conversation_id, author)
        retraction = report.retraction
        kept = await _facts(session, scope, retraction.relations_kept, retraction.entities_kept, report.deleted)
    return report, speaker_gone, kept


async def forget_person(
    memory: Memory, author: str, workspace: Workspace | None, *, principal: str, dry_run: bool
) -> PersonForgetting:
    """Forget (or plan forgetting) everything ``author`` wrote in ``workspace`` (None:
    the whole store); see the module docstring."""
    async with memory._sessions() as session:
        scopes = await _scopes(session, author, workspace)
    result = PersonForgetting(author, workspace, dry_run, conversations=len(scopes))
    removed: Counter[str] = Counter()
    if not dry_run:
        hidden = {scope.conversation_id: scope.episodes for scope in scopes if scope.episodes}
        removed["search documents"] = await hide_episodes(memory, hidden) if hidden else 0
    for scope in scopes:
        if dry_run:
            retraction, kept, gone, ids = await _dry_run(memory, scope)
            messages, speakers = len(scope.episodes), 1
            async with memory._sessions.begin() as session:  # it reveals what memory holds: audited
                details = {"author": author, "messages": messages, "counts": retraction.counts()}
                await write_audit(session, scope.conversation_id, principal, "forget_author_dry_run", details)
            result.gone += gone
            result.message_ids[str(scope.ref)] = ids
        else:
            report, speaker_gone, kept = await _forget(memory, scope, author, principal)
            retraction, messages, speakers = report.retraction, len(report.deleted), int(speaker_gone)
        removed.update(removed_counts(retraction, messages, speakers, int(retraction.summary_cleared)))
        result.messages += messages
        result.kept += kept
    result.removed = {kind: removed[kind] for kind in removed_counts(Retraction(), 0, 0, 0)}
    async with memory._sessions() as session:
        result.remaining = sum(len(s.episodes) for s in await _scopes(session, author, workspace))
    if not dry_run:  # the forgetting as a whole, beside each conversation's row
        async with memory._sessions.begin() as session:
            details = {k: getattr(result, k) for k in ("author", "messages", "conversations", "removed", "remaining")}
            platform, workspace_id = (None, None) if workspace is None else (workspace.platform, workspace.workspace_id)
            await write_store_audit(session, principal, "forget_author", details, platform=platform, workspace=workspace_id)
    return result
