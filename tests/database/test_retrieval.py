"""Hybrid search over a real database: scoping, current-over-superseded, evidence
assembly with supporting episodes."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, text

from memory.core import Memory
from memory.episodes.append import append_messages, validate_message
from memory.graph.writes import create_entity, create_relation, supersede_relation
from memory.retrieval.evidence import assemble
from memory.retrieval.lending import lend_to_exchanges
from memory.retrieval.pipeline import retrieve, service_configs
from memory.retrieval.search import Candidate, QueryVariant, SearchConfig, SearchHints, search
from memory.retrieval.search_plan import TERM_SAMPLE
from memory.retrieval.search_sql import Found, anchored_sql, by_speaker_sql, planned_sizes, ranked_lists, term_shares
from memory.retrieval.timeparse import TimeRange
from memory.store.conversations import ConversationRef, ensure_conversation
from memory.store.schema import SearchDocument

T0 = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
TEXTS = [
    ("ann", "I adopted a puppy named Biscuit from the shelter."),
    ("bob", "Our team ships the billing service on Friday."),
    ("ann", "Biscuit chewed my running shoes again."),
    ("cat", "The quarterly planning meeting moved to Room 4."),
]


async def _store(memory: Memory, conversation_id: int, texts=TEXTS, prefix: str = "m") -> list[int]:
    messages = [
        validate_message({"id": f"{prefix}{i}", "author": who, "text": body, "ts": T0 + timedelta(hours=i)})
        for i, (who, body) in enumerate(texts)
    ]
    async with memory._sessions.begin() as session:
        return [r.episode_id for r in await append_messages(session, memory.embedder, conversation_id, messages)]


async def test_search_never_leaves_its_conversation(memory: Memory, conversation_id: int) -> None:
    mine = await _store(memory, conversation_id)
    async with memory._sessions.begin() as session:
        other = await ensure_conversation(session, ConversationRef("test", "", f"other-{conversation_id}"))
    theirs = await _store(memory, other, prefix="x")
    vector = (await memory.embedder.embed(["Ann puppy Biscuit"])).vectors[0]
    async with memory._sessions.begin() as session:
        await create_entity(
            session, other, name="Biscuit", type_="animal", summary="Ann's puppy", embedding=vector, episode_ids=[theirs[0]]
        )
    async with memory._sessions.begin() as session:
        found = await search(session, conversation_id, [QueryVariant("Ann puppy Biscuit", vector)])
        scopes = {
            (d.kind, d.ref_id): d.conversation_id
            for d in (
                await session.execute(select(SearchDocument).where(SearchDocument.conversation_id.in_([conversation_id, other])))
            ).scalars()
        }
    keys = [c.key for c in found.candidates]
    assert keys, "the conversation's own messages must be found"
    assert all(scopes[key] == conversation_id for key in keys)
    assert {ref for kind, ref in keys if kind == "episode"} == set(mine)
    assert keys[0] in {("episode", mine[0]), ("episode", mine[2])}


async def test_current_fact_outranks_superseded_unless_past(memory: Memory, conversation_id: int) -> None:
    episodes = await _store(memory, conversation_id, [("ann", "I live in Boston."), ("ann", "I moved to Berlin!")])
    vector = (await memory.embedder.embed(["Ann lives in a city"])).vectors[0]
    async with memory._sessions.begin() as session:
        ann = await create_entity(
            session, conversation_id, name="Ann", type_="person", summary="", embedding=vector, episode_ids=episodes
        )
        city = await create_entity(
            session, conversation_id, name="City", type_="place", summary="", embedding=vector, episode_ids=episodes
        )
        # Same embedding and similar wording: only the preference separates them.
        old = await create_relation(
            session,
            conversation_id,
            subject_id=ann,
            object_id=city,
            predicate="lives_in",
            fact="Ann lives in Boston",
            embedding=vector,
            episode_ids=[episodes[0]],
        )
        new = await create_relation(
            session,
            conversation_id,
            subject_id=ann,
            object_id=city,
            predicate="lives_in",
            fact="Ann lives in Berlin",
            embedding=vector,
            episode_ids=[episodes[1]],
        )
        await supersede_relation(session, conversation_id, old, new, T0 + timedelta(hours=1))
    variant = QueryVariant("Where does Ann live?", vector)

    async def relation_scores(prefer_current: bool) -> dict[int, float]:
        async with memory._sessions.begin() as session:
            found = await search(
                session, conversation_id, [variant], SearchConfig(kinds=("relation",)), SearchHints(prefer_current=prefer_current)
            )
        return {c.ref_id: c.score for c in found.candidates}

    now_scores, past_scores = await relation_scores(True), await relation_scores(False)
    assert now_scores[new] > now_scores[old]
    assert now_scores[old] == past_scores[old] / 2
    before = await retrieve(memory, conversation_id, "Where did Ann live before?", T0 + timedelta(days=3))
    current = await retrieve(memory, conversation_id, "Where does Ann live?", T0 + timedelta(days=3))
    assert not before.prefer_current and current.prefer_current
    relations = [c.ref_id for c in current.candidates if c.kind == "relation"]
    assert relations.index(new) < relations.index(old)


async def test_evidence_carries_speaker_time_and_supporting_episodes(memory: Memory, conversation_id: int) -> None:
    episodes = await _store(memory, conversation_id)
    vector = (await memory.embedder.embed(["Biscuit is Ann's puppy"])).vectors[0]
    async with memory._sessions.begin() as session:
        dog = await create_entity(
            session,
            conversation_id,
            name="Biscuit",
            type_="animal",
            summary="Ann's puppy",
            embedding=vector,
            episode_ids=[episodes[0], episodes[2]],
        )
        await create_relation(
            session,
            conversation_id,
            subject_id=dog,
            object_id=dog,
            predicate="owned_by",
            fact="Biscuit is Ann's puppy",
            embedding=vector,
            episode_ids=[episodes[0]],
        )
    retrieval = await retrieve(memory, conversation_id, "Who is Biscuit?", T0 + timedelta(days=1))
    async with memory._sessions() as session:
        items = await assemble(session, conversation_id, retrieval.candidates, 30)
    by_kind = {item.kind: item for item in reversed(items)}
    assert by_kind["relation"].text == "Biscuit is Ann's puppy"
    assert [e.episode_id for e in by_kind["relation"].supporting] == [episodes[0]]
    assert {e.episode_id for e in by_kind["entity"].supporting} == {episodes[0], episodes[2]}
    episode_item = by_kind["episode"]
    assert episode_item.episode.speaker in {"ann", "bob", "cat"}
    assert episode_item.episode.message_time >= T0
    assert [item.label for item in items] == [f"E{i}" for i in range(1, len(items) + 1)]


async def test_time_expression_boosts_messages_of_that_day(memory: Memory, conversation_id: int) -> None:
    texts = [("ann", "I went for a run in the park."), ("ann", "I went for a run by the river.")]
    messages = [
        validate_message({"id": f"r{i}", "author": who, "text": body, "ts": T0 + timedelta(days=i)})
        for i, (who, body) in enumerate(texts)
    ]
    async with memory._sessions.begin() as session:
        park, river = [r.episode_id for r in await append_messages(session, memory.embedder, conversation_id, messages)]
    asked = T0 + timedelta(days=1, hours=5)
    today = await retrieve(memory, conversation_id, "Where did Ann go for a run today?", asked)
    yesterday = await retrieve(memory, conversation_id, "Where did Ann go for a run yesterday?", asked)
    assert [c.ref_id for c in today.candidates[:1]] == [river]
    assert [c.ref_id for c in yesterday.candidates[:1]] == [park]


def test_pick_context_takes_the_reply_and_the_speakers_own_messages() -> None:
    from memory.retrieval.evidence import EpisodeRef, pick_context

    def ref(i: int, who: str) -> EpisodeRef:
        return EpisodeRef(i, f"m{i}", who, "user", T0 + timedelta(minutes=i), f"text {i}")

    before = [ref(4, "bob"), ref(3, "ann")]  # nearest first
    after = [ref(6, "bob"), ref(7, "ann")]
    assert [e.episode_id for e in pick_context(ref(5, "ann"), before, after, frozenset({"bob"}))] == [3, 6, 7]
    assert [e.episode_id for e in pick_context(ref(5, "cat"), before, after, frozenset({"ann", "bob"}))] == [6]


KIND = st.sampled_from(["episode", "relation", "entity", "community"])


@given(st.lists(KIND, max_size=40), st.integers(min_value=0, max_value=45))
def test_communities_ride_beside_the_first_k_and_never_take_a_place(kinds: list[str], k: int) -> None:
    from memory.retrieval.evidence import leading

    first = kinds[: leading(kinds, k)]
    others = [kind for kind in kinds if kind != "community"]
    # exactly the first k of the other kinds, as if no community had been built ...
    assert [kind for kind in first if kind != "community"] == others[:k]
    # ... with every community ranked above the next of them, and none below it
    assert first.count("community") == kinds[: len(first)].count("community")
    if len(first) < len(kinds):
        assert kinds[len(first)] != "community"


async def test_best_hits_bring_their_surroundings_once(memory: Memory, conversation_id: int) -> None:
    from memory.retrieval.evidence import format_evidence, labelled_episodes

    chat = [
        ("ann", "Guess what, I went to the pottery class yesterday."),
        ("bob", "Oh nice, how was it?"),
        ("ann", "I made a blue bowl and a small cup."),
        ("bob", "Our team ships the billing service on Friday."),
    ]
    episodes = await _store(memory, conversation_id, chat)
    retrieval = await retrieve(memory, conversation_id, "Did Ann go to the pottery class?", T0 + timedelta(days=1))
    async with memory._sessions() as session:
        items = await assemble(session, conversation_id, retrieval.candidates, 1)
    (top,) = items
    assert top.episode.episode_id == episodes[0]
    assert [e.episode_id for e in top.context] == [episodes[1], episodes[2]]
    labels = labelled_episodes(items)
    assert [e.episode_id for e in labels["E1.2"]] == [episodes[2]]
    text = format_evidence(items)
    assert text.splitlines()[0] == "2024-05-01 (Wednesday):"
    assert "[E1.2] ann: I made a blue bowl and a small cup." in text
    async with memory._sessions() as session:
        all_items = await assemble(session, conversation_id, retrieval.candidates, 4)
    shown = [e.episode_id for item in all_items for e in item.episodes]
    assert sorted(shown) == sorted(set(shown)) == sorted(episodes)
    # The surroundings stay within their token budget: here room for the reply only.
    async with memory._sessions() as session:
        (bounded,) = await assemble(session, conversation_id, retrieval.candidates, 1, context_tokens=16)
    assert [e.episode_id for e in bounded.context] == [episodes[1]]


# ann talks with bob and with cat at once: the messages next to hers are cat's, about football.
ANN_WITH_TWO = [
    ("bob", "Ann, what did you make at the pottery class?"),
    ("cat", "Ann, did you watch the football match?"),
    ("ann", "I went to the pottery class and made a blue bowl."),
    ("cat", "The striker scored twice in the second half."),
    ("bob", "A blue bowl from your pottery class sounds lovely!"),
]


async def _ann_found(memory: Memory, conversation_id: int) -> tuple[list[int], Candidate]:
    """ANN_WITH_TWO stored, and ann's message as the search would find it."""
    episodes = await _store(memory, conversation_id, ANN_WITH_TWO)
    text = ANN_WITH_TWO[2][1]
    return episodes, Candidate("episode", episodes[2], text, None, is_current=True, score=1.0, similarity=1.0, text_rank=0.0)


async def test_a_person_talking_with_two_others_shows_the_reply_about_the_hit(memory: Memory, conversation_id: int) -> None:
    episodes, hit = await _ann_found(memory, conversation_id)
    async with memory._sessions() as session:
        (item,) = await assemble(session, conversation_id, [hit], 1)
    assert [e.episode_id for e in item.context] == [episodes[4]]


async def test_a_found_message_lends_to_its_exchange_not_the_channels_next_messages(memory: Memory, conversation_id: int) -> None:
    episodes, hit = await _ann_found(memory, conversation_id)
    async with memory._sessions() as session:
        ranked = await lend_to_exchanges(session, conversation_id, [hit], 0.25, 60)
    assert [(c.ref_id, c.score) for c in ranked] == [(episodes[2], 1.0), (episodes[0], 0.25), (episodes[4], 0.25)]


ATLAS = [
    ("priya", "Reminder that the Atlas launch review is on Thursday."),
    ("tom", "The rollback plan for Atlas is in the team wiki now."),
    ("alice", "Correction: the cut-over moved to March 27 because of the audit."),
    ("priya", "Alice is leading the Atlas migration to Postgres 16."),
    ("marco", "I adopted a dog named Biscuit over the weekend!"),
]


async def _text_search(memory: Memory, conversation_id: int, question: str) -> list[int]:
    vector = (await memory.embedder.embed([question])).vectors[0]
    async with memory._sessions.begin() as session:
        found = await search(
            session, conversation_id, [QueryVariant(question, vector)], SearchConfig(kinds=("episode",), methods=("text",))
        )
    return [c.ref_id for c in found.candidates]


async def test_hyphenated_words_are_searched_whole(memory: Memory, conversation_id: int) -> None:
    """ "cut-over" is the lexeme ``cut-ov`` (besides ``cut``): it must reach the query
    and count as a rare term, not be dropped or split again."""
    cuts = [("tom", "We cut the budget for Atlas."), ("ann", "Cut the cake at noon."), ("bob", "I cut my hair.")]
    ids = await _store(memory, conversation_id, cuts + ATLAS)
    async with memory._sessions() as session:
        shares, sampled = await term_shares(session, conversation_id, "the cut-over", TERM_SAMPLE)
    assert sampled == len(ids) and shares["cut-ov"] == 1 / len(ids) and shares["cut"] == 4 / len(ids)
    assert (await _text_search(memory, conversation_id, "When is the Atlas cut-over?"))[0] == ids[5]


async def test_full_text_ranks_rare_terms_above_common_ones(memory: Memory, conversation_id: int) -> None:
    # "atlas" is in three of five messages, "audit" in one: one match each, equal ts_rank_cd.
    ids = await _store(memory, conversation_id, ATLAS)
    assert (await _text_search(memory, conversation_id, "Atlas audit"))[0] == ids[2]


async def test_named_time_brings_its_messages_beyond_the_top_lists(memory: Memory, conversation_id: int) -> None:
    ids = await _store(memory, conversation_id)  # one message an hour from T0
    question = "What did Ann say about her running shoes?"
    vector = (await memory.embedder.embed([question])).vectors[0]
    hour = TimeRange(T0 + timedelta(hours=3), T0 + timedelta(hours=4), "at noon")
    async with memory._sessions.begin() as session:
        config = SearchConfig(top=1, methods=("vector",), kinds=("episode",))
        plain = await search(session, conversation_id, [QueryVariant(question, vector)], config)
        dated = await search(session, conversation_id, [QueryVariant(question, vector)], config, SearchHints(time_ranges=(hour,)))
    assert ids[3] not in {c.ref_id for c in plain.candidates}
    assert ids[3] in {c.ref_id for c in dated.candidates}


async def test_messages_of_the_named_speaker_come_first(memory: Memory, conversation_id: int) -> None:
    chat = [("bob", "I went hiking in the Alps last summer."), ("ann", "I went hiking in the Alps last summer.")]
    bob, ann = await _store(memory, conversation_id, chat)
    for question, first in (("Where did Ann go hiking?", ann), ("Where did Bob go hiking?", bob)):
        retrieval = await retrieve(memory, conversation_id, question, T0 + timedelta(days=1))
        assert retrieval.candidates[0].ref_id == first


async def test_the_messages_vector_lists_read_deeper_than_the_others(memory: Memory, conversation_id: int) -> None:
    chat = [(f"u{i % 3}", f"Note {i}: the {word} shipment arrived late.") for i, word in enumerate("abcdefghij")]
    await _store(memory, conversation_id, chat)
    question = "Which shipment arrived late?"
    vector = (await memory.embedder.embed([question])).vectors[0]
    async with memory._sessions.begin() as session:
        found = {}
        for deeper in (None, 4):
            config = SearchConfig(top=2, message_vector_top=deeper, methods=("vector",), kinds=("episode",))
            found[deeper] = (await search(session, conversation_id, [QueryVariant(question, vector)], config)).candidates
    assert len(found[None]) == 2 and len(found[4]) == 4
    assert [c.key for c in found[4][:2]] == [c.key for c in found[None]]  # the same list, read further
    for wrong in (1, 5):
        with pytest.raises(ValueError, match="between top and twice it"):
            SearchConfig(top=2, message_vector_top=wrong)


async def test_a_found_messages_neighbours_gain_its_score_only_where_two_people_talk(
    memory: Memory, conversation_id: int
) -> None:
    """The same messages, by two people and by three, searched as the service searches
    each: in the chat of two each message found next to another gains a share of its
    score (the chain is their exchange); in the channel of three the search lends nothing
    (the message next to a hit is most often another conversation's; the exchange's
    neighbours are lent to after the search, memory.retrieval.lending)."""
    texts = [body for _, body in TEXTS]
    await _store(memory, conversation_id, [(("ann", "bob")[i % 2], body) for i, body in enumerate(texts)])
    async with memory._sessions.begin() as session:
        channel = await ensure_conversation(session, ConversationRef("test", "", f"three-{conversation_id}"))
    await _store(memory, channel, [(("ann", "bob", "cat")[i % 3], body) for i, body in enumerate(texts)], prefix="t")
    question = "What did the puppy chew?"
    vector = (await memory.embedder.embed([question])).vectors[0]
    scores = {}
    for where, speakers in ((conversation_id, 2), (channel, 3)):
        async with memory._sessions.begin() as session:
            found = await search(session, where, [QueryVariant(question, vector)], service_configs(memory.params, speakers)[0])
        scores[where] = {c.text: c.score for c in found.candidates if c.kind == "episode"}
    assert set(scores[conversation_id]) == set(scores[channel]) == set(texts)
    assert all(scores[conversation_id][t] > scores[channel][t] for t in texts)
    assert memory.params.chain_share > 0


async def test_two_connections_find_what_one_finds(memory: Memory, conversation_id: int) -> None:
    """The full-text lists read on a second connection give the same fused order."""
    await _store(memory, conversation_id)
    question = "What did Biscuit chew?"
    vector = (await memory.embedder.embed([question])).vectors[0]
    async with memory._sessions.begin() as session:
        alone = await search(session, conversation_id, [QueryVariant(question, vector)], SearchConfig(chain_share=0.15))
    async with memory._sessions.begin() as session, memory._sessions() as text_session:
        side_by_side = await search(
            session, conversation_id, [QueryVariant(question, vector)], SearchConfig(chain_share=0.15), text_session=text_session
        )
    assert [(c.key, c.text_rank > 0) for c in side_by_side.candidates] == [(c.key, c.text_rank > 0) for c in alone.candidates]
    assert any(c.text_rank > 0 for c in alone.candidates), "full text must have found Biscuit"


async def test_search_sizes_are_the_planners_estimates(memory: Memory, conversation_id: int) -> None:
    """The plan's sizes come from EXPLAIN of statements pinned to the conversation (under
    Citus, planned on its shard), not from pg_stats."""
    await _store(memory, conversation_id, [("ann", f"note {i} about gardening") for i in range(40)])
    async with memory._engine.begin() as connection:
        await connection.execute(text("ANALYZE search_documents"))
    async with memory._sessions() as session:
        index_rows, planned = await planned_sizes(session, conversation_id, ["episode", "community"])
    assert index_rows >= planned["episode"] >= 1
    assert planned["community"] >= 1  # the planner never estimates below one row


# A group chat where Dana greets Ann and Bob by name all the time, and Ann and Bob each
# say once, in words of their own, what they play.
GROUP_CHAT = [
    ("dana", "Morning Ann and Bob!"),
    ("ann", "I've been practising the violin every evening this month."),
    ("dana", "Ann, Bob, are you both coming on Friday?"),
    ("bob", "My cello lessons start again next week, can't wait."),
    ("dana", "Thanks Ann and Bob, you two are the best!"),
    ("dana", "Bob and Ann, see you both soon!"),
    ("ann", "Sure, see you then."),
    ("dana", "Hey Ann and Bob, how are you both doing?"),
]


async def test_both_people_a_question_names_bring_their_own_messages(memory: Memory, conversation_id: int) -> None:
    """A question that joins two people ("both") finds what each of them said, which
    the same search without the speakers named and with the question's own vector (the
    names in it) misses: it brings the messages that greet them. Without the exchange's
    loan (memory.retrieval.lending, tested apart): in these eight messages every list
    finds every message, and each greeting next to the evidence gains a quarter of its
    score, as much as naming the people gave the evidence."""
    ids = await _store(memory, conversation_id, GROUP_CHAT)
    evidence = {ids[1], ids[3]}
    question = "What instruments do Ann and Bob both play?"
    memory.params = replace(memory.params, chain_share=0.0)
    retrieval = await retrieve(memory, conversation_id, question, T0 + timedelta(days=1))
    top = {c.ref_id for c in retrieval.candidates[:3] if c.kind == "episode"}
    assert evidence <= top
    vector = (await memory.embedder.embed([question])).vectors[0]
    async with memory._sessions.begin() as session:
        plain = await search(session, conversation_id, [QueryVariant(question, vector)], SearchConfig(chain_share=0.15))
    assert not evidence <= {c.ref_id for c in plain.candidates[:3] if c.kind == "episode"}


# Ann never says the word "instrument"; the entity the extractor found in her message does.
LESSONS = [
    ("ann", "Mrs Kim kept me late again tonight, same piece for an hour."),
    ("bob", "Which instrument would you learn if you had the time?"),
    ("cat", "I play in a band on Fridays, mostly covers."),
    ("bob", "Music lessons for adults are expensive around here."),
]


async def test_the_entities_nearest_a_question_bring_the_messages_behind_them(memory: Memory, conversation_id: int) -> None:
    """The anchored list: the message behind the entity nearest the question comes back
    where the question's own lists (top 2 here) do not reach it; the statement gives the
    same list whether the entities are scanned exactly or in index order."""
    ids = await _store(memory, conversation_id, LESSONS)
    question = "What instrument does Ann play?"
    vector, violin, tonight = (await memory.embedder.embed([question, "violin", "tonight"])).vectors
    async with memory._sessions.begin() as session:
        for name, entity_vector, mentioned in (("violin", violin, ids[0]), ("tonight", tonight, ids[2])):
            await create_entity(
                session, conversation_id, name=name, type_="thing", summary="", embedding=entity_vector, episode_ids=[mentioned]
            )
    config = SearchConfig(top=2, kinds=("episode", "entity"), methods=("vector",))
    variant = QueryVariant(question, vector)
    async with memory._sessions.begin() as session:
        plain = await search(session, conversation_id, [variant], config)
        anchored = await search(session, conversation_id, [variant], replace(config, anchors=1, anchor_supports=1))
        params = {"c": conversation_id, "n": 2, "q": list(vector), "anchors": 1, "supports": 1, "scan": 10}
        orders = [
            await ranked_lists(session, anchored_sql(exact), params, Found(), "similarity", True, label="anchored")
            for exact in (True, False)
        ]
    assert ("episode", ids[0]) not in [c.key for c in plain.candidates]
    assert ("episode", ids[0]) in [c.key for c in anchored.candidates]
    assert anchored.lists == plain.lists + 1
    assert orders[0] == orders[1] == {"anchored": [("episode", ids[0])]}


# Two threads of one channel talk about a trip; the question is asked in the second.
THREADS = [
    ("t1", None, "ann", "Planning the Lisbon trip, who is in?"),
    ("t1a", "t1", "bob", "Count me in for Lisbon, I booked the flights for the trip today."),
    ("t2", None, "cat", "Road trip to the coast this weekend?"),
    ("t2a", "t2", "dan", "Yes! I will drive, the van is ready."),
]


async def test_a_question_asked_in_a_thread_looks_at_its_thread_first(memory: Memory, conversation_id: int) -> None:
    """The thread's messages are one more ranked list: asked in the road trip's thread,
    the question brings that thread's best match beside the channel's (the top 1 here,
    in the Lisbon thread); the root, stored before any reply (no thread id), is the
    thread's too. A thread with no message changes nothing."""
    messages = [
        validate_message({"id": i, "author": who, "text": body, "thread_id": thread, "ts": T0 + timedelta(minutes=n)})
        for n, (i, thread, who, body) in enumerate(THREADS)
    ]
    async with memory._sessions.begin() as session:
        ids = {
            m.platform_message_id: r.episode_id
            for m, r in zip(messages, await append_messages(session, memory.embedder, conversation_id, messages), strict=True)
        }
    question = "Who booked the flights?"
    vector = (await memory.embedder.embed([question])).vectors[0]
    config = SearchConfig(top=1, kinds=("episode",), methods=("vector",))
    async with memory._sessions.begin() as session:
        channel = await search(session, conversation_id, [QueryVariant(question, vector)], config)
        asked = [
            await search(session, conversation_id, [QueryVariant(question, vector)], config, SearchHints(thread=thread))
            for thread in ("t2", "t1", "elsewhere")
        ]
    in_road_trip, in_lisbon, nowhere = ({c.ref_id for c in found.candidates} for found in asked)
    assert {c.ref_id for c in channel.candidates} == {ids["t1a"]}
    assert ids["t2"] in in_road_trip or ids["t2a"] in in_road_trip
    assert in_lisbon == {ids["t1a"]}
    assert asked[0].lists == channel.lists + 1
    assert nowhere == {ids["t1a"]} and asked[2].lists == channel.lists


async def test_asked_in_a_thread_a_named_speakers_list_holds_their_messages_there(memory: Memory, conversation_id: int) -> None:
    """Ann talks in both threads; asked in one, her list holds her messages in that thread
    only (the root's included), where asked in the channel it holds both."""
    messages = [
        validate_message({"id": i, "author": who, "text": body, "thread_id": thread, "ts": T0 + timedelta(minutes=n)})
        for n, (i, thread, who, body) in enumerate(
            [
                ("p1", None, "ann", "Trip thread: flights booked to Lisbon."),
                ("p1a", "p1", "bob", "Great, I will book the hotel."),
                ("p2", None, "cat", "Dinner thread."),
                ("p2a", "p2", "ann", "I booked a table for Friday."),
            ]
        )
    ]
    async with memory._sessions.begin() as session:
        stored = await append_messages(session, memory.embedder, conversation_id, messages)
    ids = {m.platform_message_id: r.episode_id for m, r in zip(messages, stored, strict=True)}
    vector = (await memory.embedder.embed(["What did Ann book?"])).vectors[0]
    params = {"c": conversation_id, "n": 5, "cap": 100, "q": list(vector), "name": "ann"}
    async with memory._sessions.begin() as session:
        channel = await ranked_lists(session, by_speaker_sql(), params, Found(), "similarity", True)
        threads = {
            thread: await ranked_lists(
                session, by_speaker_sql(in_thread=True), {**params, "thread": thread}, Found(), "similarity", True
            )
            for thread in ("p1", "p2")
        }
    assert set(channel["episode"]) == {("episode", ids["p1"]), ("episode", ids["p2a"])}
    assert threads["p1"] == {"episode": [("episode", ids["p1"])]}
    assert threads["p2"] == {"episode": [("episode", ids["p2a"])]}


async def test_a_named_person_at_a_named_time_is_one_more_list(memory: Memory, conversation_id: int) -> None:
    """In a busy channel a day holds every conversation's messages: a question naming a
    person and a time also ranks that person's messages of that time on their own."""
    chat = [
        ("ann", "I started volunteering at the dog shelter."),  # hour 0
        ("bob", "I started a book club at the library."),
        ("ann", "I started pottery classes on Tuesdays."),  # hour 2
        ("cat", "I started running every morning."),
    ]
    ids = await _store(memory, conversation_id, chat)
    question = "What did Ann start?"
    vector = (await memory.embedder.embed([question])).vectors[0]
    hour = TimeRange(T0 + timedelta(hours=1), T0 + timedelta(hours=3), "that afternoon")
    bounds = {"start0": hour.start, "end0": hour.end}
    params = {"c": conversation_id, "n": 5, "cap": 100, "q": list(vector), "name": "ann"}
    async with memory._sessions.begin() as session:
        theirs = await ranked_lists(session, by_speaker_sql(ranges=1), {**params, **bounds}, Found(), "similarity", True)
        config = SearchConfig(methods=("vector",), kinds=("episode",))
        variant = [QueryVariant(question, vector)]
        named = await search(session, conversation_id, variant, config, SearchHints(named_speakers=("ann",)))
        timed = await search(session, conversation_id, variant, config, SearchHints(time_ranges=(hour,)))
        both = await search(session, conversation_id, variant, config, SearchHints(time_ranges=(hour,), named_speakers=("ann",)))
    assert theirs == {"episode": [("episode", ids[2])]}  # ann's, of that time only
    # The question's list and ann's, or the question's and the time's; with both, ann's of that time too.
    assert (named.lists, timed.lists, both.lists) == (2, 2, 4)
    assert both.candidates[0].ref_id == ids[2]
