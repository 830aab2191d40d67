"""Forgetting a person (memory.forget_author) in a two-channel, three-person workspace,
ingested and consolidated through the public API: no word only they said survives,
the others' facts stay, each of their messages' provenance says "deleted"; a dry run
changes nothing and predicts the counts; an interrupted forgetting hides them at once
and a rerun finishes."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select

import memory as api
from lab.probes import word_residue
from memory.core import Memory
from memory.privacy import person
from memory.store.schema import AuditEntry, Episode, Relation, RelationProvenance, Speaker, StoreAuditEntry
from tests.database.test_forgetting_batch import _snapshot

OPERATOR = api.Principal.operator("test")
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
CHANNELS = {
    "C1": [
        ("U1", "Ann", "I moved to Lisbon with Bob last spring."),
        ("U2", "Bob", "Lisbon is great, I work at Feedzai there."),
        ("U3", "Cy", "Bob told me he adopted a dog named Pixel."),
        ("U2", "Bob", "Pixel loves the beach at Cascais."),
        ("U1", "Ann", "Bob and I go hiking in Sintra."),
    ],
    "C2": [
        ("U2", "Bob", "I sold my Vespa in Porto yesterday."),
        ("U3", "Cy", "I visited Porto in May."),
        ("U2", "Bob", "Sintra hiking with Ann is my favourite weekend."),
        ("U1", "Ann", "Ann works at Google in Lisbon."),
    ],
}
BOBS = {f"{c}-m{i}" for c, chat in CHANNELS.items() for i, (who, _, _) in enumerate(chat, 1) if who == "U2"}


async def _workspace(memory: Memory) -> tuple[api.Workspace, dict[str, api.ConversationRef]]:
    team = f"T{uuid.uuid4().hex[:8]}"
    refs = {c: api.ConversationRef("slack", team, c) for c in CHANNELS}
    for channel, chat in CHANNELS.items():
        messages = [
            api.validate_message(
                {"id": f"{channel}-m{i}", "author_id": who, "author_name": name, "text": text, "ts": T0 + timedelta(minutes=i)}
            )
            for i, (who, name, text) in enumerate(chat, start=1)
        ]
        await api.ingest(memory, refs[channel], messages, principal=OPERATOR)
        await api.consolidate(memory, refs[channel], principal=OPERATOR)
    return api.Workspace("slack", team), refs


async def _cid(memory: Memory, ref: api.ConversationRef) -> int:
    return await api.resolve_conversation(memory, ref, principal=OPERATOR)


async def others_relations(memory: Memory, cid: int, theirs: set[str] = BOBS) -> set[int]:
    """Relations some message not among ``theirs`` (by default Bob's) supports."""
    async with memory._sessions() as session:
        rows = await session.execute(
            select(RelationProvenance.relation_id)
            .join(Episode, Episode.id == RelationProvenance.episode_id)
            .where(RelationProvenance.conversation_id == cid, ~Episode.platform_message_id.in_(theirs))
        )
        return set(rows.scalars())


async def test_forgetting_a_person_leaves_no_word_only_they_said(memory: Memory) -> None:
    workspace, refs = await _workspace(memory)
    kept_before = {c: await others_relations(memory, await _cid(memory, ref)) for c, ref in refs.items()}
    assert all(kept_before.values())

    result = await api.forget_author(memory, "U2", workspace=workspace, principal=OPERATOR)

    assert (result.messages, result.conversations, result.remaining) == (4, 2, 0)
    assert result.removed["messages"] == 4 and result.removed["speakers"] == 2 and result.removed["relations"] > 0
    assert result.kept and all(f.others >= 1 for f in result.kept)
    text = result.render()
    assert "Forgot 4 message(s) by U2" in text and "others' messages still support" in text
    for channel, ref in refs.items():
        cid = await _cid(memory, ref)
        bobs = [t for who, _, t in CHANNELS[channel] if who == "U2"]
        residue = await word_residue(memory, ref, bobs)
        assert {"feedzai", "cascais", "vespa", "favourite"} & residue.checked
        assert residue.found == {}, residue.found
        stored = {m.message_id for m in await api.stored_messages(memory, ref, principal=OPERATOR)}
        assert stored == {f"{channel}-m{i}" for i, (who, _, _) in enumerate(CHANNELS[channel], 1) if who != "U2"}
        for message in BOBS & {f"{channel}-m{i}" for i in range(1, 6)}:
            assert (await api.provenance(memory, ref, message, principal=OPERATOR)).status == "deleted"
        async with memory._sessions() as session:
            relations = set((await session.execute(select(Relation.id).where(Relation.conversation_id == cid))).scalars())
            speakers = set(
                (await session.execute(select(Speaker.platform_user_id).where(Speaker.conversation_id == cid))).scalars()
            )
            actions = [
                (principal, details["author"], len(details["deleted"]))
                for principal, details in await session.execute(
                    select(AuditEntry.principal, AuditEntry.details).where(
                        AuditEntry.conversation_id == cid, AuditEntry.action == "forget_author"
                    )
                )
            ]
        assert kept_before[channel] <= relations  # the others' facts stay
        assert "U2" not in speakers and {"U1", "U3"} <= speakers
        assert actions == [(str(OPERATOR), "U2", 2)]

    async with memory._sessions() as session:
        whole = (
            await session.execute(
                select(StoreAuditEntry.principal, StoreAuditEntry.details).where(
                    StoreAuditEntry.action == "forget_author", StoreAuditEntry.workspace_id == workspace.workspace_id
                )
            )
        ).all()
    assert [(p, d["author"], d["messages"], d["remaining"]) for p, d in whole] == [(str(OPERATOR), "U2", 4, 0)]

    again = await api.forget_author(memory, "U2", workspace=workspace, principal=OPERATOR)
    assert again.messages == 0 and again.lines() == [f"Nothing to forget: no message by U2 is stored in workspace {workspace}."]


async def test_a_dry_run_changes_nothing_and_predicts_the_forgetting(memory: Memory) -> None:
    workspace, refs = await _workspace(memory)
    before = {c: await _snapshot(memory, await _cid(memory, ref)) for c, ref in refs.items()}
    planned = await api.forget_author(memory, "U2", workspace=workspace, principal=OPERATOR, dry_run=True)
    assert {c: await _snapshot(memory, await _cid(memory, ref)) for c, ref in refs.items()} == before
    for ref in refs.values():
        async with memory._sessions() as session:
            rows = await session.execute(
                select(AuditEntry.action, AuditEntry.details).where(AuditEntry.conversation_id == await _cid(memory, ref))
            )
            dry = [d for action, d in rows if action == "forget_author_dry_run"]
        assert len(dry) == 1 and dry[0]["author"] == "U2" and dry[0]["messages"] == 2
    assert planned.dry_run and planned.messages == 4 and planned.remaining == 4
    assert planned.render().startswith("Would forget 4 message(s) by U2")
    done = await api.forget_author(memory, "U2", workspace=workspace, principal=OPERATOR)
    assert planned.removed == done.removed
    assert sorted((f.conversation, f.kind) for f in planned.kept) == sorted((f.conversation, f.kind) for f in done.kept)


async def test_unknown_workspace_and_absent_author(memory: Memory) -> None:
    workspace, _ = await _workspace(memory)
    with pytest.raises(api.ValidationError, match="no conversation of workspace 'slack:TNOPE'"):
        await api.forget_author(memory, "U2", workspace=api.Workspace("slack", "TNOPE"), principal=OPERATOR)
    nobody = await api.forget_author(memory, "U9", workspace=workspace, principal=OPERATOR)
    assert nobody.messages == 0 and nobody.render().startswith("Nothing to forget")


async def test_an_interrupted_forgetting_hides_them_and_a_rerun_finishes(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the hiding transaction, no answer cites the person's messages: not while
    a conversation is being forgotten, not after a failure left one unforgotten."""
    workspace, refs = await _workspace(memory)
    second = await _cid(memory, refs["C2"])
    real = person.forget_episodes
    asked: list[set[str]] = []

    async def cited() -> set[str]:
        found: set[str] = set()
        for ref in refs.values():
            for question in ("Where does Bob work?", "What did Bob sell in Porto?", "Who likes Sintra hiking?"):
                answer = await api.ask(memory, ref, question, principal=OPERATOR)
                found |= {c.platform_message_id for c in answer.citations}
                found |= {e.episode.platform_message_id for e in answer.evidence if e.episode is not None}
                found |= {s.platform_message_id for e in answer.evidence for s in (*e.supporting, *e.context)}
        return found

    async def interrupted(memory_: Memory, conversation_id: int, episode_ids: Any, **kwargs: Any) -> Any:
        asked.append(await cited())  # during the forgetting
        if conversation_id == second:
            raise RuntimeError("injected failure")
        return await real(memory_, conversation_id, episode_ids, **kwargs)

    before = await cited()
    assert before & BOBS  # the questions do reach Bob's messages while they are stored
    monkeypatch.setattr(person, "forget_episodes", interrupted)
    with pytest.raises(RuntimeError, match="injected failure"):
        await api.forget_author(memory, "U2", workspace=workspace, principal=OPERATOR)
    assert len(asked) == 2 and not (asked[0] | asked[1]) & BOBS
    assert not await cited() & BOBS  # after the failure: C2's messages are stored but hidden
    stored = {m.message_id for m in await api.stored_messages(memory, refs["C2"], principal=OPERATOR)}
    assert {"C2-m1", "C2-m3"} <= stored

    monkeypatch.setattr(person, "forget_episodes", real)
    finished = await api.forget_author(memory, "U2", workspace=workspace, principal=OPERATOR)
    assert (finished.messages, finished.remaining) == (2, 0)  # C1's were done before
    assert not await cited() & BOBS
    for message in BOBS:
        ref = refs[message.split("-")[0]]
        assert (await api.provenance(memory, ref, message, principal=OPERATOR)).status == "deleted"
