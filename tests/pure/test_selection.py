"""Offline answer selection (pure): what is quoted first, what is never quoted first,
and when the answer is "not in memory"."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from memory.retrieval.answering import NOT_IN_MEMORY, draft_offline
from memory.retrieval.evidence import EpisodeRef
from memory.retrieval.reading import candidate_names
from memory.retrieval.selection import (
    DEFAULT_WEIGHTS,
    EXCHANGE_GAP,
    EXCHANGE_SPAN,
    AbstentionRule,
    Cues,
    Seen,
    SelectionWeights,
    Turn,
    choose,
    exchange_terms,
    features,
    first_told,
    in_named_time,
)
from memory.retrieval.timeparse import TimeRange
from memory.retrieval.wording import answer_type, asks_about_asker, first_person, has_answer_type, is_question, third_person

T0 = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
SPEAKERS = ["Priya", "Tom", "Alice"]
OPEN = SelectionWeights(abstention=AbstentionRule(refuse_above=float("inf")))


def seen(
    i: int, speaker: str, text: str, *, terms=(), similarity=0.5, rank=0.5, outdated=False, correction=None, role="user"
) -> Seen:
    """A message as reading shows it: its searched (exchange) vector, and its own vector
    to the question in the first person, as close as its own to the question, and the
    terms of a sentence that asks nothing stated."""
    episode = EpisodeRef(i, f"m{i}", speaker, role, T0 + timedelta(minutes=i), text)
    stated = frozenset(terms) if "?" not in text else frozenset()
    return Seen(
        episode,
        rank,
        similarity,
        frozenset(terms),
        exchange=similarity,
        personal=similarity,
        stated_terms=stated,
        outdated=outdated,
        correction=correction,
    )


def test_answer_types() -> None:
    assert answer_type("When is the launch?") == "time"
    assert answer_type("How many dogs does Tom have?") == "number"
    assert answer_type("Who is writing the plan?") == "person"
    assert answer_type("Where did Tom move to?") == "place"
    assert answer_type("What does Tom like?") is None
    assert has_answer_type("time", "The launch is on Friday.", T0, SPEAKERS)
    assert has_answer_type("number", "I have two dogs.", T0, SPEAKERS)
    assert has_answer_type("person", "Marco is writing it.", T0, SPEAKERS)
    assert not has_answer_type("person", "Tom, can you write it?", T0, SPEAKERS)
    assert has_answer_type("place", "Tom moved to Kettleburg last month.", T0, SPEAKERS)


def test_is_question() -> None:
    assert is_question("Where did Tom move to?")
    assert not is_question("Tom moved to Kettleburg. Did you know?")


def test_a_message_about_the_named_person_by_anyone_beats_their_small_talk() -> None:
    cues = Cues({"move": 1.0}, named="Tom", name_forms=("Tom",), answer_type="place")
    chat = [
        seen(1, "Tom", "Morning all, coffee is ready.", similarity=0.4, rank=1.0),
        seen(2, "Tom", "Ha, that is a good one.", similarity=0.35, rank=0.9),
        seen(3, "Priya", "Tom moved to Kettleburg last month.", terms={"move"}, similarity=0.5, rank=0.5),
    ]
    choice = choose(cues, chat, SPEAKERS)
    assert choice.in_memory and choice.ranked[0][0].episode.platform_message_id == "m3"


def test_a_question_is_not_the_answer_and_an_outdated_message_is_never_first() -> None:
    cues = Cues({"launch": 1.0}, answer_type="time")
    fix = EpisodeRef(3, "m3", "Priya", "user", T0 + timedelta(days=1), "Correction: the launch is on Friday.")
    chat = [
        seen(1, "Tom", "When is the launch?", terms={"launch"}, similarity=0.9, rank=1.0),
        seen(2, "Priya", "The launch is on Monday.", terms={"launch"}, similarity=0.8, rank=1.0, outdated=True, correction=fix),
        seen(3, "Priya", "Correction: the launch is on Friday.", terms={"launch"}, similarity=0.6, rank=0.6),
    ]
    choice = choose(cues, chat, SPEAKERS)
    assert choice.ranked[0][0].episode.platform_message_id == "m3"
    assert choice.ranked[-1][0].outdated


def test_the_reply_leads_with_the_correction_and_marks_the_outdated_message() -> None:
    cues = Cues({"launch": 1.0}, answer_type="time")
    fix = EpisodeRef(3, "m3", "Priya", "user", T0 + timedelta(days=1), "Correction: the launch is on Friday.")
    chat = [
        seen(2, "Priya", "The launch is on Monday.", terms={"launch"}, similarity=0.8, rank=1.0, outdated=True, correction=fix)
    ]
    drafted = draft_offline(choose(cues, chat, SPEAKERS, OPEN))
    assert drafted.text.startswith('Priya said on 03 March 2026: "Correction: the launch is on Friday."')
    assert [m.platform_message_id for m in drafted.messages] == ["m3", "m2"]
    outdated = drafted.messages[1]
    assert outdated.outdated and outdated.correction is not None and outdated.correction.platform_message_id == "m3"
    assert not drafted.messages[0].outdated


def test_someone_never_mentioned_is_not_in_memory() -> None:
    cues = Cues({"dog": 1.0}, unknown_people=("Gregor",))
    choice = choose(cues, [seen(1, "Tom", "My dog is called Rex.", terms={"dog"}, similarity=0.9, rank=1.0)], SPEAKERS, OPEN)
    assert not choice.in_memory and "Gregor" in (choice.refusal or "")
    assert draft_offline(choice).text == NOT_IN_MEMORY


def test_another_speakers_experience_is_not_the_named_ones() -> None:
    """LoCoMo's adversarial form: the question gives Priya's race to Tom. Only Priya's
    message states its words, so the default rule refuses; asked of Priya, it answers."""
    chat = [
        seen(1, "Priya", "I ran a charity race last Sunday!", terms={"charity", "race"}, similarity=0.8, rank=1.0),
        seen(2, "Tom", "Nice, well done.", similarity=0.3, rank=0.5),
    ]
    about_tom = Cues({"charity": 1.0, "race": 1.0}, named="Tom", name_forms=("Tom",))
    choice = choose(about_tom, chat, SPEAKERS)
    assert not choice.in_memory and "other than Tom" in (choice.refusal or "")
    about_priya = Cues({"charity": 1.0, "race": 1.0}, named="Priya", name_forms=("Priya",))
    answered = choose(about_priya, chat, SPEAKERS)
    assert answered.in_memory and answered.ranked[0][0].episode.platform_message_id == "m1"
    assert answered.doubt < choice.doubt


chats = st.lists(
    st.tuples(
        st.sampled_from(SPEAKERS),
        st.sampled_from(["I ran a charity race.", "Nice, well done.", "My dog is called Rex.", "The race was long."]),
        st.floats(0, 1),
        st.floats(0, 1),
    ),
    min_size=1,
    max_size=10,
)


def _chat(rows) -> list[Seen]:
    words = {"charity", "race", "dog"}
    return [
        seen(i, who, text, similarity=sim, rank=rank, terms={w for w in words if w in text.lower()})
        for i, (who, text, sim, rank) in enumerate(rows)
    ]


@given(chats, st.sampled_from([None, *SPEAKERS]), st.floats(-5, 5), st.floats(0, 5))
def test_refusal_is_monotone_in_the_doubt_threshold(rows, named, threshold, lower_by) -> None:
    """Whatever refuses at one threshold refuses at every lower one, and the doubt does not
    depend on the order the evidence shows the messages in."""
    cues = Cues({"charity": 2.0, "race": 1.0}, named=named, name_forms=(named,) if named else ())
    chat = _chat(rows)

    def at(value: float, messages: list[Seen]):
        return choose(cues, messages, SPEAKERS, SelectionWeights(abstention=AbstentionRule(refuse_above=value)))

    high, low = at(threshold, chat), at(threshold - lower_by, chat)
    assert high.doubt == low.doubt
    if not high.in_memory:
        assert not low.in_memory
    assert at(threshold, chat[::-1]).doubt == high.doubt


@given(chats)
def test_without_a_named_speaker_nothing_is_refused_as_someone_elses(rows) -> None:
    choice = choose(Cues({"charity": 2.0, "race": 1.0}), _chat(rows), SPEAKERS, DEFAULT_WEIGHTS)
    assert choice.mismatch == 0.0
    assert "other than" not in (choice.refusal or "")


def test_candidate_names() -> None:
    assert candidate_names("What did Gregor say about Tom's dog in May?", SPEAKERS) == ["Gregor"]
    assert candidate_names("Where did Tom move to?", SPEAKERS) == []
    # A run of capitalised words is one name; a title in quotes, a sentence's first word
    # and a title such as "Dr" name no one.
    assert candidate_names("What does Tom like about LeBron James?", SPEAKERS) == ["LeBron James"]
    assert candidate_names('Would Priya enjoy "The Four Seasons" by Vivaldi?', SPEAKERS) == ["Vivaldi"]
    assert candidate_names("Was May good for Tom? Answer yes or no.", SPEAKERS) == []
    assert candidate_names("Would Alice like Dr. Seuss books?", SPEAKERS) == ["Seuss"]


texts = st.sampled_from(["Sure.", "When is it?", "The launch is on Friday.", "I moved to Berlin.", "Two dogs."])


@given(st.lists(st.tuples(texts, st.floats(0, 1), st.floats(0, 1), st.booleans(), st.booleans()), min_size=1, max_size=12))
def test_no_bot_no_question_and_no_outdated_message_leads_while_a_current_one_is_there(rows) -> None:
    chat = [
        seen(i, "Tom", text, similarity=sim, rank=rank, outdated=old, role="bot" if bot else "user", terms={"launch"})
        for i, (text, sim, rank, old, bot) in enumerate(rows)
    ]
    choice = choose(Cues({"launch": 1.0}), chat, SPEAKERS, OPEN)
    people = [s for s in chat if not s.episode.is_bot and not is_question(s.episode.text)]
    assert len(choice.ranked) == len(people)
    if choice.ranked:
        first = choice.ranked[0][0]
        assert not first.episode.is_bot
        assert not first.outdated or all(s.outdated for s in people)


def test_the_answer_to_a_follow_up_question_is_found_by_the_statement_it_continues() -> None:
    """Melanie's camping trip: the third message holds the answer and none of the
    question's words; the statement two messages before it does."""
    cues = Cues({"camp": 1.0, "famili": 1.0}, named="Melanie", name_forms=("Melanie",))
    opener = Turn("Melanie", T0 + timedelta(minutes=1), frozenset({"took", "famili", "camp"}))
    asked = Turn("Caroline", T0 + timedelta(minutes=2), frozenset({"fun"}))
    answer = seen(3, "Melanie", "We roasted marshmallows and went on a hike!", similarity=0.3, rank=0.6)
    answer = Seen(**{**answer.__dict__, "before": (asked, opener)})
    small_talk = seen(4, "Melanie", "Hope your weekend was great too!", similarity=0.35, rank=1.0)
    values = features(cues, answer, SPEAKERS)
    assert values["coverage"] == 0 and values["lead"] == 1.0 and values["follow"] == 0
    assert choose(cues, [small_talk, answer], SPEAKERS, OPEN).ranked[0][0].episode.platform_message_id == "m3"
    alone = Seen(**{**answer.__dict__, "before": ()})
    assert choose(cues, [small_talk, alone], SPEAKERS, OPEN).ranked[0][0].episode.platform_message_id == "m4"


def test_an_exchange_lends_its_meaning_to_the_message_that_ends_it() -> None:
    """The camping exchange asked in other words ("What did Melanie get up to on her
    outdoor trip?"): no word matches, but her opener, shown beside the answer, is close
    in meaning; it lends that to the answer ending the exchange. Caroline's bare
    question between them, though closer still, lends nothing."""
    cues = Cues({"outdoor": 1.0, "trip": 1.0}, named="Melanie", name_forms=("Melanie",))
    opener = seen(1, "Melanie", "I took my family camping last week.", similarity=0.45)
    asked = seen(2, "Caroline", "Where did you go on your trip?", similarity=0.6)
    answer = seen(3, "Melanie", "We roasted marshmallows and went on a hike!", similarity=0.2)
    turn = lambda s: Turn(s.episode.speaker, s.episode.message_time, s.terms)  # noqa: E731
    answer = replace(answer, before=(turn(asked), turn(opener)))
    shown = {(s.episode.speaker, s.episode.message_time): s for s in (opener, answer)}
    values = features(cues, answer, SPEAKERS, shown)
    assert values["lead_similarity"] == 0.45 and values["follow_similarity"] == 0.2 and values["lead"] == 0
    assert features(cues, answer, SPEAKERS)["lead_similarity"] == 0.2  # the opener not shown
    chosen = choose(cues, [opener, asked, answer], SPEAKERS, OPEN)
    assert chosen.features[3]["lead_similarity"] == 0.45  # the bare question is not in the exchange's meaning


turns = st.lists(
    st.tuples(st.sampled_from(SPEAKERS), st.integers(0, 180), st.frozensets(st.sampled_from(["a", "b", "c", "d"]))),
    max_size=6,
)


@given(st.sampled_from(SPEAKERS), st.frozensets(st.sampled_from(["a", "b", "c"])), turns)
def test_an_exchange_ends_at_the_same_speaker_a_lull_or_the_span(speaker, own, rows) -> None:
    chain, last = [], T0
    for who, minutes, terms in rows:
        last += timedelta(minutes=minutes)
        chain.append(Turn(who, last, terms))
    found = exchange_terms(speaker, T0, own, chain)
    assert own <= found <= own.union(*(t.terms for t in chain[:EXCHANGE_SPAN]))
    ends, previous = None, T0
    for index, turn in enumerate(chain[:EXCHANGE_SPAN]):
        if turn.message_time - previous > EXCHANGE_GAP:
            break
        if turn.speaker == speaker:
            ends = index
            break
        previous = turn.message_time
    if ends is None:  # no message of the speaker's own closes an exchange: its own terms alone
        assert found == own
    else:
        assert found == own.union(*(t.terms for t in chain[: ends + 1]))
        # What follows the speaker's own next message changes nothing.
        assert exchange_terms(speaker, T0, own, chain[: ends + 1]) == found


def test_a_named_time_prefers_what_was_said_within_it() -> None:
    march = TimeRange(T0.replace(day=1), T0.replace(month=4, day=1), "in March")
    assert in_named_time((), T0) == 0.0
    assert in_named_time((march,), T0) == 1.0
    assert in_named_time((march,), T0 + timedelta(days=40)) == -1.0
    cues = Cues({"launch": 1.0}, time_ranges=(march,))
    later = seen(1, "Tom", "The launch went well.", terms={"launch"}, similarity=0.6, rank=1.0)
    later = Seen(**{**later.__dict__, "episode": EpisodeRef(1, "m1", "Tom", "user", T0 + timedelta(days=40), later.episode.text)})
    then = seen(2, "Tom", "The launch is today.", terms={"launch"}, similarity=0.5, rank=0.9)
    assert choose(cues, [later, then], SPEAKERS, OPEN).ranked[0][0].episode.platform_message_id == "m2"


def test_a_question_whose_every_message_is_about_the_named_person_is_answered() -> None:
    """With nobody else's message to compare, no gap counts towards the doubt (Zack's
    message about Yara, after Yara's own was deleted)."""
    cues = Cues({"live": 1.0}, named="Yara", name_forms=("Yara",))
    chat = [seen(2, "Zack", "Yara lives in Brindlemere Quays now.", terms={"live"}, similarity=0.65, rank=1.0)]
    choice = choose(cues, chat, SPEAKERS + ["Yara", "Zack"])
    assert choice.signals is not None and choice.signals.personal_gap == choice.signals.exchange_gap == 0
    assert choice.in_memory and choice.ranked[0][0].episode.platform_message_id == "m2"


def test_first_person_asks_as_the_named_speaker() -> None:
    assert first_person("Where is Omar based now?", ("Omar",)) == "Where am I based now?"
    assert first_person("What does Dana drive?", ("Dana",)) == "What do I drive?"
    assert first_person("Has Melanie Smith camped?", ("Melanie Smith", "Melanie")) == "Have I camped?"
    assert first_person("Where is Lena's sister studying?", ("Lena",)) == "Where is my sister studying?"
    assert first_person("Who invited Nate to the trails?", ("Nate",)) == "Who invited me to the trails?"
    assert first_person("What can't Priya eat?", ("Priya",)) == "What can't I eat?"
    assert first_person("Why did Melanie choose the agency?", ("Melanie",)) == "Why did I choose the agency?"
    assert first_person("Who looks after the budget?", ()) == "Who looks after the budget?"


def test_third_person_names_the_asker_where_the_question_is_about_them() -> None:
    assert third_person("What did I say about the launch?", "Ann") == "What did Ann say about the launch?"
    assert third_person("when is my flight?", "Ann") == "when is Ann's flight?"
    assert third_person("What do I like to cook?", "Ann Lee") == "What does Ann Lee like to cook?"
    assert third_person("Am I on call this weekend?", "Ann") == "Is Ann on call this weekend?"
    assert third_person("Have I paid Bo back?", "Ann") == "Has Ann paid Bo back?"
    assert third_person("i'm flying where next week?", "Ann") == "Ann is flying where next week?"
    assert third_person("Is the blue mug mine?", "Ann") == "Is the blue mug Ann's?"
    # Asking the bot for something is not asking about oneself.
    assert third_person("Can you tell me when I moved?", "Ann") == "Can you tell me when Ann moved?"
    assert not asks_about_asker("remind me what Bo said about the launch")
    assert asks_about_asker("what did Bo say about me?")


@given(
    st.sampled_from(["What did {} say?", "Where is {} based now?", "What does {} drive?", "Has {} camped?", "Who met {}?"]),
    st.sampled_from(["Omar", "Dana Wu", "Li"]),
)
def test_a_question_asked_in_the_first_person_names_its_asker_again(template: str, name: str) -> None:
    """``third_person`` undoes ``first_person``: the question names its asker again, and
    says no "I", "me" or "my"."""
    asked = first_person(template.format(name), (name, name.split()[0]))
    assert asks_about_asker(asked)
    again = third_person(asked, name)
    assert again == template.format(name) and not asks_about_asker(again)


@given(st.text(alphabet="abc XYZ?'", max_size=30))
def test_first_person_leaves_a_question_naming_nobody_as_it_is(question: str) -> None:
    assert first_person(question, ()) == question
    assert "Omar" not in first_person(question + " Omar's Omar", ("Omar",))


def test_a_message_answering_the_question_in_other_words_is_related() -> None:
    """No word of "What does Dana drive?" is in "I finally got a Honda Civic", but asked
    as Dana would ask it ("What do I drive?") the message is close; her message on
    something else is not, and it alone is "nothing stored says what is asked"."""
    cues = Cues({"drive": 3.0}, named="Dana", name_forms=("Dana",), first_person="What do I drive?")
    civic = replace(seen(1, "Dana", "I finally got a Honda Civic last month.", similarity=0.11, rank=1.0), personal=0.41)
    offsite = replace(seen(2, "Dana", "Our team offsite is booked for July.", similarity=0.02, rank=0.9), personal=-0.01)
    chosen = choose(cues, [civic, offsite], SPEAKERS + ["Dana"], OPEN)
    assert not chosen.unrelated and chosen.ranked[0][0] is civic
    alone = choose(cues, [offsite], SPEAKERS + ["Dana"], OPEN)
    assert alone.unrelated and alone.refusal == "nothing stored says what is asked"


def test_only_a_close_message_by_or_about_the_named_person_makes_the_question_related() -> None:
    """The question "What is the name of Marco's dog?" holds no word of any message here. Alice's
    "Biscuit is adorable" is close in meaning but not about Marco: alone beside Marco's
    lunch plans it is "nothing stored says what is asked" (the demo after deleting
    Marco's message). Marco's own close message, even when it is not ranked first,
    makes the question related."""
    cues = Cues({"dog": 3.0}, named="Marco", name_forms=("Marco",), first_person="What is the name of my dog?")
    alice = replace(seen(14, "Alice", "Biscuit is adorable. I have a cat called Miso.", similarity=0.55, rank=1.0), personal=0.4)
    lunch = replace(seen(4, "Marco", "Hey Tom, I sit on the fourth floor. Lunch on Wednesday?", similarity=0.05), personal=0.05)
    alone = choose(cues, [alice, lunch], SPEAKERS + ["Marco"], OPEN)
    assert alone.unrelated and alone.refusal == "nothing stored says what is asked"
    puppy = replace(seen(13, "Marco", "We got a puppy at the weekend.", similarity=0.3, rank=0.1), personal=0.3, hit=False)
    related = choose(cues, [alice, lunch, puppy], SPEAKERS + ["Marco"], OPEN)
    assert not related.unrelated
    nobody = replace(cues, named=None, name_forms=())
    assert not choose(nobody, [alice, lunch], SPEAKERS + ["Marco"], OPEN).unrelated


def test_a_question_asking_when_finds_the_message_that_first_told_it() -> None:
    """Asked "When did Andrew adopt Toby?": the puppy is first named when he arrives and again
    later; the first message naming him is the one asked about. The weightiest term any
    message holds decides ("adopt" is held by none), and only for a question asking when."""
    cues = Cues({"toby": 2.0, "adopt": 1.5, "andrew": 0.5}, answer_type="time")
    arrived = seen(1, "Andrew", "Meet Toby, my puppy!", terms={"meet", "toby", "puppi"})
    later = seen(5, "Andrew", "Toby loves the park, Andrew says.", terms={"toby", "love", "park", "andrew"})
    other = seen(3, "Audrey", "Andrew, how was your week?", terms={"andrew", "week"})
    shown = [arrived, other, later]
    assert first_told(cues, shown) == ("toby", arrived.episode.message_time)
    first = first_told(cues, shown)
    assert [features(cues, s, SPEAKERS, first=first)["earliest"] for s in shown] == [1.0, 0.0, 0.0]
    assert first_told(replace(cues, answer_type=None), shown) is None
    assert first_told(cues, [other]) == ("andrew", other.episode.message_time)
