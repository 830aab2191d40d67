"""Integration: the chat service against the real database and the real local embedder.
The platform side is a recording ``Platform`` (the seam itself: the Slack and Discord
tests drive their real clients through it)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.events import (
    AdminCommand,
    Author,
    ChannelDeleted,
    ChatMessage,
    Mention,
    MessageDeleted,
    MessageEdited,
    MessagePosted,
    Reply,
    ReplyTarget,
    ThreadDeleted,
)
from connectors.service import ChatService, ServiceConfig, message_runs
from memory import ConversationRef, InboxItem, Memory, Principal, UnknownConversation, inbox_backlog, inbox_claim, messages
from memory.store.residue import find_tokens

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TEST = Principal.operator("test")


class RecordingPlatform:
    name = "test"
    connected = True

    def __init__(self, failures: int = 0) -> None:
        self.replies: list[Reply] = []
        self.failures = failures

    async def describe(self, conversation: ConversationRef, author: Author) -> Author:
        return dataclasses.replace(author, name=author.name or f"Name {author.id}", role=author.role or "user")

    async def deliver(self, reply: Reply) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("platform unreachable")
        self.replies.append(reply)


@pytest.fixture
def ref() -> ConversationRef:
    return ConversationRef("test", "W1", f"C{uuid.uuid4().hex[:10]}")


@pytest.fixture
def platform() -> RecordingPlatform:
    return RecordingPlatform()


@pytest.fixture
def service(memory: Memory, platform: RecordingPlatform) -> ChatService:
    return ChatService(memory, [platform], ServiceConfig(admin_ids=frozenset({"UADMIN"}), retry_seconds=0, max_attempts=2))


def message(message_id: str, text: str, minute: int = 0, author: str = "U1", thread: str | None = None) -> ChatMessage:
    return ChatMessage(message_id, Author(author), text, T0 + timedelta(minutes=minute), thread_id=thread)


def posted(ref: ConversationRef, message_id: str, text: str, minute: int = 0, **kwargs: str) -> MessagePosted:
    return MessagePosted(ref, f"ev-{message_id}", message(message_id, text, minute, **kwargs))


def mention(ref: ConversationRef, message_id: str, question: str, minute: int = 30) -> Mention:
    return Mention(
        ref,
        f"ev-{message_id}",
        message(message_id, f"<@BOT> {question}", minute, author="U9"),
        question,
        ReplyTarget(message_id=message_id),
    )


async def stored(memory: Memory, ref: ConversationRef) -> dict[str, str]:
    return {str(m["message_id"]): str(m["text"]) for m in await messages(memory, ref, principal=TEST)}


async def test_a_redelivered_event_is_stored_once(service: ChatService, memory: Memory, ref: ConversationRef) -> None:
    event = posted(ref, "m1", "The offsite is in Lisbon.")
    assert await service.accept(event) is True
    assert await service.accept(event) is False
    assert await service.drain() == 1
    assert await stored(memory, ref) == {"m1": "The offsite is in Lisbon."}
    speaker = (await messages(memory, ref, principal=TEST))[0]["speaker"]
    assert speaker == "Name U1"


async def test_a_delete_before_its_create_leaves_the_message_unstored(
    service: ChatService, memory: Memory, ref: ConversationRef
) -> None:
    await service.accept(MessageDeleted(ref, "ev-del", "m1"))
    await service.accept(posted(ref, "m1", "Too late"))
    await service.accept(posted(ref, "m2", "Still here", 1))
    await service.drain()
    assert await stored(memory, ref) == {"m2": "Still here"}


async def test_events_accepted_together_are_stored_once_each_in_arrival_order(service: ChatService, memory: Memory) -> None:
    """Concurrent acknowledgements share writes: per event, new or a redelivery (also a
    copy in the same write), in three conversations (two of them new), in the order accepted."""
    refs = [ConversationRef("test", "W1", f"C{uuid.uuid4().hex[:10]}") for _ in range(3)]
    await service.accept(posted(refs[0], "m0", "The first message."))
    events = [posted(refs[i % 3], f"m{i}", f"Message number {i}.", i) for i in range(30)]
    results = await asyncio.gather(*(service.accept(e) for e in [*events, events[4], events[7]]))
    assert results == [i != 0 for i in range(30)] + [False, False]
    for ref in refs:
        async with inbox_claim(memory, ref, principal=TEST) as claim:
            assert claim is not None
            items = await claim.next(50)
        assert [item.event_id for item in items] == [f"ev-m{i}" for i in range(30) if i % 3 == refs.index(ref)]


async def test_an_edit_changes_the_answer_and_an_edit_of_an_unknown_message_stores_it(
    service: ChatService, platform: RecordingPlatform, memory: Memory, ref: ConversationRef
) -> None:
    await service.accept(posted(ref, "m1", "The offsite venue is the Lisbon harbour hotel."))
    await service.accept(posted(ref, "m2", "Lunch is at noon.", 1))
    await service.accept(mention(ref, "q1", "Where is the offsite venue?"))
    await service.accept(MessageEdited(ref, "ev-edit", message("m1", "The offsite venue is the Porto river lodge.")))
    await service.accept(MessageEdited(ref, "ev-edit-late", message("m3", "Bring a jacket.", 2)))
    await service.accept(mention(ref, "q2", "Where is the offsite venue?", 40))
    await service.drain()
    first, second = platform.replies
    assert "Lisbon" in first.text and "Porto" not in first.text
    assert "Porto" in second.text and "Lisbon" not in second.text
    assert "m1" in [c.message_id for c in second.citations]
    assert (await stored(memory, ref))["m3"] == "Bring a jacket."


async def test_a_mention_is_answered_with_citations_then_stored_and_never_cites_itself(
    service: ChatService, platform: RecordingPlatform, memory: Memory, ref: ConversationRef
) -> None:
    await service.accept(posted(ref, "m1", "The quarterly offsite will be held in Lisbon in May."))
    await service.accept(mention(ref, "q1", "Where will the quarterly offsite be held?"))
    await service.accept(mention(ref, "q2", "Where will the quarterly offsite be held?", 31))
    await service.drain()
    assert [r.kind for r in platform.replies] == ["answer", "answer"]
    for reply in platform.replies:
        assert reply.target.message_id in {"q1", "q2"}
        cited = [c.message_id for c in reply.citations]
        assert "m1" in cited and reply.target.message_id not in cited
    assert platform.replies[0].citations[0].message_id == "m1"
    assert set(await stored(memory, ref)) == {"m1", "q1", "q2"}


async def test_a_deleted_message_is_never_cited_and_leaves_no_text_in_the_inbox(
    service: ChatService, platform: RecordingPlatform, memory: Memory, ref: ConversationRef
) -> None:
    marker = f"zq{uuid.uuid4().hex[:8]}7"
    await service.accept(posted(ref, "m1", f"The launch code name is {marker} for the offsite."))
    await service.accept(posted(ref, "m2", "The offsite launch party is on Friday.", 1))
    await service.accept(mention(ref, "q1", "What is the launch code name for the offsite?"))
    await service.drain()
    assert "m1" in {c.message_id for c in platform.replies[0].citations}
    await service.accept(MessageDeleted(ref, "ev-del", "m1"))
    await service.accept(mention(ref, "q2", "What is the launch code name for the offsite?", 50))
    await service.drain()
    assert "m1" not in {c.message_id for c in platform.replies[1].citations}
    assert marker not in platform.replies[1].text
    async with memory._sessions() as session:
        assert marker not in await find_tokens(session, "zq[0-9a-f]{8}7")


async def test_events_left_by_a_dead_process_are_processed_by_the_next_and_claims_exclude(
    memory: Memory, ref: ConversationRef
) -> None:
    first = ChatService(memory, [RecordingPlatform()])
    await first.accept(posted(ref, "m1", "Acknowledged, never processed."))
    # ``first`` dies here; a new process (a new service on the same database) takes over.
    second = ChatService(memory, [RecordingPlatform()])
    async with inbox_claim(memory, ref, principal=TEST) as held:
        assert held is not None
        assert await second.process_conversation(ref) == 0  # another process holds it
    assert await second.drain() == 1
    assert await stored(memory, ref) == {"m1": "Acknowledged, never processed."}


async def test_an_answer_that_cannot_be_posted_holds_up_neither_its_question_nor_later_events(
    memory: Memory, ref: ConversationRef
) -> None:
    """Defect 12: the question is stored and the conversation goes on while the reply
    waits in the outbox; the reply is posted once, late."""
    platform = RecordingPlatform(failures=5)
    config = ServiceConfig(retry_seconds=0, max_attempts=2, reply_retry_seconds=0.2, reply_retry_max_seconds=0.2)
    service = ChatService(memory, [platform], config)
    await service.accept(posted(ref, "m0", "The offsite is in Lisbon."))
    await service.accept(mention(ref, "q1", "Where is the offsite?"))
    await service.accept(posted(ref, "m1", "After the mention.", 40))
    await service.drain()
    assert set(await stored(memory, ref)) == {"m0", "q1", "m1"}
    backlog = await inbox_backlog(memory, principal=TEST)
    assert platform.replies == [] and backlog.replies_pending >= 1
    for _ in range(50):
        await asyncio.sleep(0.1)
        await service.drain()
        if platform.replies:
            break
    await asyncio.sleep(0.05)
    await service.drain()
    assert [r.target.message_id for r in platform.replies] == ["q1"]
    assert "Lisbon" in platform.replies[0].text or platform.replies[0].citations


async def test_a_reply_that_cannot_be_posted_for_too_long_is_kept_as_failed_and_reported(
    memory: Memory, ref: ConversationRef
) -> None:
    platform = RecordingPlatform(failures=10**6)
    config = ServiceConfig(reply_retry_seconds=0, reply_give_up_seconds=0.5)
    service = ChatService(memory, [platform], config)
    await service.accept(mention(ref, "q1", "Anything?"))
    await service.drain()
    await asyncio.sleep(0.6)
    await service.drain()
    backlog = await inbox_backlog(memory, principal=TEST)
    assert backlog.replies_failed >= 1
    assert "q1" in await stored(memory, ref)


async def test_a_queued_reply_citing_a_message_deleted_meanwhile_is_posted_without_it(
    memory: Memory, ref: ConversationRef
) -> None:
    # The platform is unreachable until the deletion has been processed: a drain that
    # takes longer than the retry delay (a loaded cluster) retries, and fails, meanwhile.
    platform = RecordingPlatform(failures=10**6)
    config = ServiceConfig(reply_retry_seconds=0.3, reply_retry_max_seconds=0.3)
    service = ChatService(memory, [platform], config)
    await service.accept(posted(ref, "m0", "The offsite is in Lisbon."))
    await service.accept(mention(ref, "q1", "Where is the offsite?"))
    await service.drain()  # the post failed: the reply waits 0.3 s
    await service.accept(MessageDeleted(ref, "ev-del", "m0"))
    await service.drain()
    assert platform.replies == []
    platform.failures = 0
    await asyncio.sleep(0.35)
    await service.drain()
    (reply,) = platform.replies
    assert "Lisbon" not in reply.text and reply.citations == () and "withdrawn" in reply.text


async def test_admin_commands_are_refused_to_others(
    service: ChatService, platform: RecordingPlatform, memory: Memory, ref: ConversationRef
) -> None:
    await service.accept(posted(ref, "m1", "Hello there."))
    target = ReplyTarget(user_id="U1", ephemeral=True)
    await service.accept(AdminCommand(ref, "cmd-1", Author("U1"), "stats", target))
    await service.accept(AdminCommand(ref, "cmd-2", Author("UADMIN"), "stats", target))
    await service.drain()
    refusal, stats = platform.replies
    assert refusal.kind == "refusal" and "admins only" in refusal.text
    assert stats.kind == "audit" and stats.text.startswith("1 messages by 1 speakers")


async def test_thread_and_channel_deletion_forget_what_they_held(
    service: ChatService, memory: Memory, ref: ConversationRef
) -> None:
    await service.accept(posted(ref, "m1", "Parent message.", 0, thread="m1"))
    await service.accept(posted(ref, "m2", "Reply in the thread.", 1, thread="m1"))
    await service.accept(posted(ref, "m3", "Elsewhere in the channel.", 2))
    await service.accept(ThreadDeleted(ref, "ev-thread", "m1"))
    await service.drain()
    assert await stored(memory, ref) == {"m3": "Elsewhere in the channel."}
    await service.accept(ChannelDeleted(ref, "ev-channel"))
    await service.drain()
    with pytest.raises(UnknownConversation):
        await stored(memory, ref)


async def test_run_processes_until_stopped(service: ChatService, memory: Memory, ref: ConversationRef) -> None:
    runner = asyncio.create_task(service.run())
    await service.accept(posted(ref, "m1", "Live."))
    for _ in range(100):
        if await stored(memory, ref):
            break
        await asyncio.sleep(0.05)
    service.stop()
    await asyncio.wait_for(runner, 10)
    assert await stored(memory, ref) == {"m1": "Live."}


@given(st.lists(st.sampled_from(["message", "edit", "delete", "mention"]), max_size=40), st.integers(1, 5))
def test_runs_keep_order_and_group_only_consecutive_creates(kinds: list[str], limit: int) -> None:
    items = [InboxItem(n, f"e{n}", kind, {}, 0) for n, kind in enumerate(kinds)]
    runs = message_runs(items, limit)
    assert [item for run in runs for item in run] == items
    for run in runs:
        assert len(run) == 1 or (len(run) <= limit and {i.kind for i in run} == {"message"})
    for before, after in zip(runs, runs[1:], strict=False):
        assert not (before[-1].kind == after[0].kind == "message" and len(before) < limit)


async def test_an_older_edit_arriving_after_a_newer_one_changes_nothing(
    service: ChatService, memory: Memory, ref: ConversationRef
) -> None:
    await service.accept(posted(ref, "m1", "Version one."))
    newer = MessageEdited(ref, "ev-e2", message("m1", "Version three."), T0 + timedelta(minutes=3))
    older = MessageEdited(ref, "ev-e1", message("m1", "Version two."), T0 + timedelta(minutes=2))
    await service.accept(newer)
    await service.accept(older)  # Slack's retry of a delivery that failed the first time
    await service.drain()
    assert await stored(memory, ref) == {"m1": "Version three."}


async def test_the_first_events_of_a_new_conversation_arriving_at_once_are_all_stored(
    service: ChatService, ref: ConversationRef
) -> None:
    """Each creates the conversation or finds it created meanwhile; none is taken for a redelivery."""
    events = [MessageDeleted(ref, f"ev-{n}", f"m{n}") for n in range(16)]
    assert all(await asyncio.gather(*(service.accept(event) for event in events)))
    assert not any(await asyncio.gather(*(service.accept(event) for event in events)))
    assert await service.drain() == 16


async def test_admin_commands_run_the_audit_queries(
    service: ChatService, platform: RecordingPlatform, memory: Memory, ref: ConversationRef
) -> None:
    await service.accept(posted(ref, "m1", "The offsite venue is the Lisbon harbour hotel."))
    await service.accept(mention(ref, "q1", "Where is the offsite venue?"))
    await service.drain()
    answer_id = platform.replies[0].answer_id
    assert answer_id is not None
    await service.accept(MessageDeleted(ref, "ev-del", "m1"))
    target = ReplyTarget(user_id="UADMIN", ephemeral=True)
    for n, text in enumerate([f"why {answer_id}", "forgotten", "provenance q1", "about Lisbon", "why soon", "nonsense"]):
        await service.accept(AdminCommand(ref, f"cmd-{n}", Author("UADMIN"), text, target))
    await service.drain()
    why, gone, supports, about, bad, help_text = (r.text for r in platform.replies[1:])
    assert f"Answer {answer_id}" in why and "withdrawn" in why and "m1" in why
    assert "delete of message m1" in gone
    assert supports.startswith("Message q1 supports:")
    assert "Lisbon" in about
    assert "give the answer's number" in bad
    assert help_text.startswith("/memory about")


async def test_a_claim_is_given_back_after_its_time_and_the_rest_claimed_again(
    memory: Memory, platform: RecordingPlatform, ref: ConversationRef
) -> None:
    """A claim holds a transaction open (VACUUM waits for it): it ends after
    ``claim_seconds`` even with events left, which the next claim processes, in order."""
    service = ChatService(memory, [platform], ServiceConfig(batch=1, claim_seconds=0))
    for i in range(3):
        await service.accept(posted(ref, f"m{i}", f"Message number {i}", i))
    assert await service.process_conversation(ref) == 1
    assert await service.drain() == 2
    assert await stored(memory, ref) == {f"m{i}": f"Message number {i}" for i in range(3)}
