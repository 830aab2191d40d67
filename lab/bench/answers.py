"""``stashbird bench answers``: is the answer a person sees the right one? Offline, LoCoMo.

Every question is answered as ``stashbird ask`` does without a model (retrieval, then
offline answer selection), on conversations ingested and consolidated with the offline
extractor. For categories 1-4 (answerable): the share whose first cited message is an
evidence turn, whose cited messages include one, whose answer holds every content word
of the gold answer (lower-cased, stop words left out, words compared by their English
stem), and the share refused as "not in memory". For category 5 (adversarial: the
question gives one speaker's experience to the other, or asks about something never
said) the share answered "not in memory". Tokens per answer are the tiktoken count of
the reply as a chat shows it (answer line and cited messages). The baseline, from the
same retrieval in the same run, is the extractive answer before answer selection: the
best three fused items above a relevance floor, quoted.

Splits: parameters are chosen on the calibration split (26, 30, 41, 42, 43) only; the
held-out split (44, 47, 48, 49, 50) is what the defaults are judged by. Both are
printed, with the abstention curve of each: for values of the doubt threshold around
its default, the share of adversarial questions answered "not in memory" and of
answerable ones wrongly refused (a question naming someone never mentioned, or whose
best message holds nothing of it, is refused throughout). ``--fit`` runs the calibration
split alone and prints what ``memory.calibrate`` chooses on it beside the defaults.

First person (``--first-person``): each question that names one speaker is also asked as
that speaker would ask it ("What did I paint?"), once by them (a person of the
conversation: the question is read with their name for "I") and once by the operator (no
one to name), beside the same questions as written.

Reworded questions: the questions that have a hand-written rewording in
``lab/data/locomo_paraphrases.json`` (the same meaning in other content words; see its
note) are asked both ways, and the split prints the two side by side: first citation is
evidence, answerable refused, category 5 "not in memory", and where the lost answers
were lost: an evidence turn among the messages selection read (retrieval found it) and
ranked first by selection before any refusal; then how many answerable questions
changed each way (refused, first citation) with McNemar's exact p, since a gap of a few
points over 125 questions may be chance. ``--fit`` fits on the calibration split's
questions both as written and reworded (a person asks in their own words); the held-out
split's rewordings are never fitted on.

With ``--group``, each split's conversations are also merged into one group channel
(``lab.group_channels``; by default ``interleaved``, turns alternating message by message
with no threads; ``--group threads``, each conversation a thread; ``--cast pairs``, every
speaker under their own name instead of the ring's cast) and its questions
answered there: the split's figures in the channel beside alone, and their ratio (channel
over alone). Channel answers are neither fitted on nor reworded; with ``--first-person``
they are also asked in the first person, by the cast name that asks.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot import locomo
from bot.progress import progress
from bot.settings import Settings
from lab.bench.common import (
    BENCH,
    REUSE_DATABASE,
    SPLITS,
    add_cast_argument,
    add_locomo_argument,
    bench_memory,
    channel_run_id,
    load_locomo,
    locomo_conversation,
    question_date,
    ratios,
    reuse_run_id,
    times,
)
from lab.bench.rewordings import Rewording, load_rewordings
from lab.group_channels import LAYOUTS, build_channel
from lab.probes import (
    NOT_IN_MEMORY,
    AbstentionRule,
    Labelled,
    SelectionWeights,
    baseline_reply,
    calibrate,
    count_tokens,
    first_person,
    named_speaker,
)
from memory import Answer, ConversationRef, Memory, Principal, ValidationError, ask, normalize_id

ADVERSARIAL = 5
DEFAULTS = SelectionWeights()  # the calibrated weights and abstention rule
# Answers are computed without the doubt threshold so that the sweep sees every
# question's scores; the default rule is applied to them afterwards.
OPEN_WEIGHTS = dataclasses.replace(DEFAULTS, abstention=dataclasses.replace(DEFAULTS.abstention, refuse_above=float("inf")))
# The curve: the doubt threshold moved by these steps from its default.
STEPS = (-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0)
_STOP = set(
    "a an the and or of to in on at for with by from is are was were be been being it its this that these those "
    "i me my we our you your he him his she her they them their as about into over after before than then so "
    "but not no do does did has have had will would can could should may might just very also".split()
)
_WORD = re.compile(r"[a-z0-9]+")


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)
    parser.add_argument(
        "--split", choices=("both", *SPLITS), default="both", help="which split(s) to run (default: both, each printed)"
    )
    parser.add_argument("--only", default="", help="only these conversations, by file name, comma-separated")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations of each split")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the benchmark database between runs (shared with bench retrieval --reuse) and skip "
        "ingest and consolidation of the conversations it already holds",
    )
    parser.add_argument(
        "--fit",
        action="store_true",
        help="run the calibration split only and print the selection weights and abstention rule fitted on it "
        "(the defaults are this output) beside the defaults",
    )
    parser.add_argument(
        "--group",
        nargs="?",
        const="interleaved",
        choices=LAYOUTS,
        help="also: each split's conversations merged into one group channel (lab/group_channels.py), "
        "its questions answered there beside alone, with the ratio; the channel's layout: interleaved "
        "(the default, bare --group: turns alternating, no threads), threads (each conversation a thread keeping its days) "
        "or threaded (turns alternating, each conversation a thread)",
    )
    parser.add_argument(
        "--first-person",
        action="store_true",
        help='also ask each question that names one speaker as that speaker would ask it ("What did I paint?"), '
        "once by them and once by the operator (no one to name), printed beside the same questions as written",
    )
    add_cast_argument(parser)


def stem(word: str) -> str:
    """A crude English stem, the same on both sides of a comparison. Pure."""
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP}


def holds_answer(reply: str, gold: str) -> bool:
    """Every content word of the gold answer is in the reply (no content word: False). Pure."""
    wanted = content_words(gold)
    return bool(wanted) and wanted <= content_words(reply)


@dataclass
class Tally:
    """Figures of one answering policy over one split."""

    answerable: int = 0
    first_evidence: int = 0
    any_evidence: int = 0
    holds_answer: int = 0
    refused: int = 0
    adversarial: int = 0
    abstained: int = 0
    tokens: int = 0
    answers: int = 0
    # Where a lost answer was lost: evidence among the messages selection read
    # (retrieval found it) and ranked first by selection before any refusal.
    evidence_read: int = 0
    ranked_first: int = 0
    by_category: dict[int, list[int]] = field(default_factory=dict)  # asked, first evidence, refused/abstained

    def add(
        self,
        category: int,
        gold: set[str],
        gold_answer: str,
        cited: Sequence[str],
        refused: bool,
        reply: str,
        ranked: Sequence[str] = (),
    ) -> None:
        self.answers += 1
        self.tokens += count_tokens(reply)
        counts = self.by_category.setdefault(category, [0, 0, 0])
        counts[0] += 1
        counts[2] += refused
        if category == ADVERSARIAL:
            self.adversarial += 1
            self.abstained += refused
            return
        first = bool(cited) and cited[0] in gold
        self.answerable += 1
        self.first_evidence += first
        self.any_evidence += bool(gold & set(cited))
        self.holds_answer += (not refused) and holds_answer(reply, gold_answer)
        self.refused += refused
        self.evidence_read += bool(gold & set(ranked))
        self.ranked_first += bool(ranked) and ranked[0] in gold
        counts[1] += first

    def figures(self) -> dict[str, Any]:
        n, a = max(self.answerable, 1), max(self.adversarial, 1)
        return {
            "answerable": self.answerable,
            "first_citation_evidence": round(self.first_evidence / n, 4),
            "citations_include_evidence": round(self.any_evidence / n, 4),
            "answer_holds_gold_words": round(self.holds_answer / n, 4),
            "answerable_refused": round(self.refused / n, 4),
            "evidence_read": round(self.evidence_read / n, 4),
            "ranked_first_evidence": round(self.ranked_first / n, 4),
            "adversarial": self.adversarial,
            "adversarial_not_in_memory": round(self.abstained / a, 4),
            "tokens_per_answer": round(self.tokens / max(self.answers, 1), 1),
            "by_category": {
                str(c): {"questions": q, "first_citation_evidence": round(f / q, 4), "refused": round(r / q, 4)}
                for c, (q, f, r) in sorted(self.by_category.items())
            },
        }


def mcnemar_p(one_way: int, other_way: int) -> float:
    """McNemar's exact two-sided test: the chance that paired outcomes that changed
    ``one_way`` and ``other_way`` times are at least this lopsided when either change is
    as likely (a binomial test at one half over the changed pairs). Pure."""
    changed = one_way + other_way
    fewer = min(one_way, other_way)
    tail: float = sum(math.comb(changed, i) for i in range(fewer + 1)) / 2**changed
    return min(1.0, 2 * tail)


Outcome = tuple[Sequence[str], bool]  # the cited turns and whether the answer was refused


@dataclass
class Changes:
    """Answerable questions asked as written and reworded: how many changed which way.
    A gap between two shares of 125 questions is only a few questions; the changes and
    their exact McNemar test tell a gap that rewording causes from chance."""

    refused_reworded_only: int = 0
    refused_as_written_only: int = 0
    first_lost: int = 0  # first citation evidence as written, not reworded
    first_gained: int = 0

    def add(self, category: int, gold: set[str], written: Outcome, reworded: Outcome) -> None:
        if category == ADVERSARIAL:
            return
        (cited, refused), (cited_reworded, refused_reworded) = written, reworded
        self.refused_reworded_only += refused_reworded and not refused
        self.refused_as_written_only += refused and not refused_reworded
        first, first_reworded = bool(cited) and cited[0] in gold, bool(cited_reworded) and cited_reworded[0] in gold
        self.first_lost += first and not first_reworded
        self.first_gained += first_reworded and not first

    def figures(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "refused_p": round(mcnemar_p(self.refused_reworded_only, self.refused_as_written_only), 4),
            "first_p": round(mcnemar_p(self.first_lost, self.first_gained), 4),
        }


def reply_text(result: Answer) -> str:
    """The reply as a chat shows it: the answer line, then each cited message."""
    lines = [result.reply.line]
    lines += [f"{m.speaker}, {m.message_time:%d %B %Y}: {m.text}" for m in result.reply.messages[1:]]
    return "\n".join(lines)


@dataclass
class Sweep:
    """The abstention curve: for each value of the doubt threshold, the share of
    adversarial questions abstained and of answerable ones refused."""

    points: dict[float, list[int]] = field(default_factory=lambda: {step: [0, 0, 0, 0] for step in STEPS})

    def add(self, category: int, result: Answer, rule: AbstentionRule) -> None:
        confidence = result.confidence
        for step, counts in self.points.items():
            refused = bool(confidence["unknown"] or confidence["unrelated"]) or refusal(result, rule, step)
            if category == ADVERSARIAL:
                counts[0] += 1
                counts[1] += refused
            else:
                counts[2] += 1
                counts[3] += refused

    def figures(self, rule: AbstentionRule) -> list[dict[str, float]]:
        return [
            {
                "value": round(rule.refuse_above + step, 3),
                "adversarial_not_in_memory": round(a / max(n, 1), 4),
                "answerable_refused": round(r / max(m, 1), 4),
            }
            for step, (n, a, m, r) in self.points.items()
        ]


def refusal(result: Answer, rule: AbstentionRule, step: float = 0.0) -> bool:
    """The doubt rule (its threshold moved by ``step``) applied to an answer computed
    without it."""
    return result.confidence["doubt"] > rule.refuse_above + step


def ranked_ids(result: Answer) -> list[str]:
    """The messages selection read, as it ranked them (refused or not)."""
    return [seen.episode.platform_message_id for seen, _ in result.selection.ranked] if result.selection else []


async def _answer(
    memory: Memory, ref: ConversationRef, text: str, when: datetime, asker: Principal = BENCH
) -> tuple[Answer, list[str], bool, str]:
    """The answer computed without the doubt threshold, then the default rule applied:
    the answer, its cited turns, whether it is refused, and the reply as shown."""
    result = await ask(memory, ref, text, principal=asker, date=when, weights=OPEN_WEIGHTS)
    refused = not result.in_memory or refusal(result, DEFAULTS.abstention)
    cited = [] if refused else [c.platform_message_id for c in result.citations]
    return result, cited, refused, NOT_IN_MEMORY if refused else reply_text(result)


async def _split(
    memory: Memory,
    conversations: list[locomo.Conversation],
    run_id: str,
    name: str,
    labelled: list[Labelled],
    rewordings: dict[tuple[str, int], Rewording],
    first_persons: bool = False,
) -> dict[str, Any]:
    system, baseline, sweep = Tally(), Tally(), Sweep()
    # The questions that have a hand-written rewording, asked both ways.
    original, reworded, changes = Tally(), Tally(), Changes()
    # The questions that name one speaker: as written, and in the first person by them and by no one named.
    third, by_them, unnamed = Tally(), Tally(), Tally()
    rule = DEFAULTS.abstention
    with progress(sum(len(c.questions) for c in conversations), f"answers {name}") as bar:
        for conversation in conversations:
            ref, stored = await locomo_conversation(memory, conversation, run_id, True)
            asked_on = question_date(conversation)
            for index, question in enumerate(conversation.questions):
                bar.update(1)
                gold = {e for e in question.evidence if e in stored}
                adversarial = question.category == ADVERSARIAL
                if not adversarial and not gold:
                    continue
                result, cited, refused, shown = await _answer(memory, ref, question.question, asked_on)
                if result.selection is not None:
                    labelled.append(Labelled(result.selection, frozenset(gold), adversarial, conversation.name))
                sweep.add(question.category, result, rule)
                ranked = ranked_ids(result)
                system.add(question.category, gold, question.answer, cited, refused, shown, ranked)
                text, baseline_cited = baseline_reply(result.evidence)
                baseline.add(question.category, gold, question.answer, baseline_cited, not baseline_cited, text)
                rewording = rewordings.get((conversation.name, index))
                if rewording is not None:
                    original.add(question.category, gold, question.answer, cited, refused, shown, ranked)
                    again, cited_reworded, refused_reworded, said = await _answer(memory, ref, rewording.reworded, asked_on)
                    if again.selection is not None:
                        labelled.append(Labelled(again.selection, frozenset(gold), adversarial, conversation.name))
                    reworded.add(
                        question.category, gold, question.answer, cited_reworded, refused_reworded, said, ranked_ids(again)
                    )
                    changes.add(question.category, gold, (cited, refused), (cited_reworded, refused_reworded))
                asked = first_person_of(question.question, conversation.speakers) if first_persons else None
                if asked is not None:
                    text, speaker = asked
                    third.add(question.category, gold, question.answer, cited, refused, shown, ranked)
                    for tally, asker in ((by_them, Principal.user(normalize_id(speaker, "author"))), (unnamed, BENCH)):
                        again, cited_again, refused_again, reply = await _answer(memory, ref, text, asked_on, asker)
                        tally.add(question.category, gold, question.answer, cited_again, refused_again, reply, ranked_ids(again))
    figures = {
        "conversations": [c.name for c in conversations],
        "system": system.figures(),
        "baseline": baseline.figures(),
        "abstention_curve": sweep.figures(rule),
    }
    if original.answers:
        figures["reworded"] = {"original": original.figures(), "reworded": reworded.figures(), "changes": changes.figures()}
    if third.answers:
        figures["first_person"] = {"as_written": third.figures(), "by_them": by_them.figures(), "unnamed": unnamed.figures()}
    return figures


def first_person_of(question: str, speakers: Sequence[str]) -> tuple[str, str] | None:
    """The question as the one speaker it names would ask it ("What did Melanie paint?"
    asked by Melanie: "What did I paint?"), with that speaker; None when it names none
    or several, or says nothing a person would say of themselves. Pure."""
    speaker = named_speaker(question, speakers)
    if speaker is None:
        return None
    asked = first_person(question, (speaker, speaker.split()[0]))
    return (asked, speaker) if asked != question else None


async def _group(
    memory: Memory,
    conversations: list[locomo.Conversation],
    run_id: str,
    alone: dict[str, Any],
    layout: str,
    cast: str,
    first_persons: bool = False,
) -> dict[str, Any]:
    """``--group``: the conversations' group channel in ``layout`` with the ``cast`` rule
    answered as ``_split`` answers them (no rewordings, nothing fitted on; in the first
    person too with ``first_persons``), beside their figures ``alone``."""
    channel = build_channel(conversations, layout=layout, cast=cast).conversation
    run = channel_run_id(run_id, layout, cast)
    figures = await _split(memory, [channel], run, channel.name, [], {}, first_persons)
    found = figures["system"]
    return {
        "channel_name": channel.name,
        "layout": layout,
        "cast_rule": cast,
        "cast": list(channel.speakers),
        "alone": alone,
        "channel": found,
        "ratio": ratios(found, alone),
        **({"first_person": figures["first_person"]} if "first_person" in figures else {}),
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    if args.cast != "ring" and not args.group:
        raise ValidationError("--cast", "names the cast of the group channel: add --group")
    conversations = {c.name: c for c in load_locomo(args.locomo)}
    split_name = "calibration" if args.fit else args.split
    names: dict[str, tuple[str, ...]] = dict(SPLITS) if split_name == "both" else {split_name: SPLITS[split_name]}
    # Any other folder in LoCoMo's format has no such split: all of it is one "all" split.
    if not all(n in conversations for split in names.values() for n in split):
        names = {"all": tuple(conversations)}
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        names = {split: tuple(n for n in chosen if n in wanted) for split, chosen in names.items()}
    if args.conversations:
        names = {split: chosen[: args.conversations] for split, chosen in names.items()}
    run_id = reuse_run_id(True) if args.reuse else uuid.uuid4().hex[:6]
    database = REUSE_DATABASE if args.reuse else "stashbird_bench_answers"
    result: dict[str, Any] = {"bench": "answers", "weights": dataclasses.asdict(DEFAULTS), "splits": {}}
    labelled: list[Labelled] = []
    rewordings = load_rewordings(conversations)
    async with bench_memory(settings, database, keep=args.reuse) as memory:
        for split, chosen in names.items():
            if chosen:
                chosen_conversations = [conversations[n] for n in chosen]
                result["splits"][split] = await _split(
                    memory, chosen_conversations, run_id, split, labelled, rewordings, args.first_person
                )
                if args.group:
                    alone = result["splits"][split]["system"]
                    result.setdefault("group", {})[split] = await _group(
                        memory, chosen_conversations, run_id, alone, args.group, args.cast, args.first_person
                    )
    if args.fit:
        result["fitted"] = dataclasses.asdict(calibrate(labelled))
    return result


def _line(name: str, f: dict[str, Any]) -> str:
    return (
        f"  {name:<9} first citation is evidence {f['first_citation_evidence']:6.1%}   citations include evidence "
        f"{f['citations_include_evidence']:6.1%}   answer holds gold words {f['answer_holds_gold_words']:6.1%}   "
        f"answerable refused {f['answerable_refused']:6.1%}   category 5 not in memory {f['adversarial_not_in_memory']:6.1%}"
        f"   tokens/answer {f['tokens_per_answer']:6.1f}"
    )


def render(result: dict[str, Any]) -> str:
    weights = result["weights"]
    lines = [
        "LoCoMo answers, offline (extractive); defaults chosen on the calibration split "
        f"(doubt threshold {weights['abstention']['refuse_above']})"
    ]
    for split, figures in result["splits"].items():
        system = figures["system"]
        lines.append(
            f"{split} split (conversations {', '.join(figures['conversations'])}): {system['answerable']} answerable "
            f"questions with evidence, {system['adversarial']} adversarial"
        )
        lines.append(_line("stashbird", system))
        lines.append(_line("baseline", figures["baseline"]))
        lines.append(
            "  by category (first citation is evidence / refused): "
            + "  ".join(f"{c}: {v['first_citation_evidence']:.0%}/{v['refused']:.0%}" for c, v in system["by_category"].items())
        )
        lines.append(
            "  abstention curve over the doubt threshold (category 5 not in memory / answerable refused): "
            + "  ".join(
                f"{p['value']:.2f}: {p['adversarial_not_in_memory']:.0%}/{p['answerable_refused']:.0%}"
                for p in figures["abstention_curve"]
            )
        )
        if "reworded" in figures:
            lines += _reworded(figures["reworded"])
        if "first_person" in figures:
            lines += _first_person(figures["first_person"])
    for split, group in result.get("group", {}).items():
        lines.append(
            f"{split} split in one group channel ({group['channel_name']}, {group['layout']} layout, {group['cast_rule']} cast, "
            f"cast {', '.join(group['cast'])}; "
            "lab/group_channels.py), the same questions; ratio is channel over alone:"
        )
        lines += [_line("alone", group["alone"]), _line("channel", group["channel"])]
        r = group["ratio"]
        lines.append(
            f"  {'ratio':<9} first citation is evidence {times(r['first_citation_evidence']):>6}   citations include evidence "
            f"{times(r['citations_include_evidence']):>6}   answer holds gold words {times(r['answer_holds_gold_words']):>6}   "
            f"answerable refused {times(r['answerable_refused']):>6}   category 5 not in memory "
            f"{times(r['adversarial_not_in_memory']):>6}   tokens/answer {times(r['tokens_per_answer']):>6}"
        )
        if "first_person" in group:
            lines += _first_person(group["first_person"])
    if "fitted" in result:
        lines += _fitted(result["fitted"], weights)
    return "\n".join(lines)


def _fitted(fitted: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """Each fitted value beside its default; the same values mean the defaults are what
    the calibration split chooses."""
    rows = [(name, fitted[name], defaults[name]) for name in fitted if name != "abstention"]
    rows += [(f"abstention.{name}", value, defaults["abstention"][name]) for name, value in fitted["abstention"].items()]
    same = all(value == default for _, value, default in rows)
    lines = [f"fitted on the calibration split ({'the defaults' if same else 'differs from the defaults'}):"]
    lines += [f"  {name} = {value}" + ("" if value == default else f"   (default {default})") for name, value, default in rows]
    return lines


def _first_person(asked: dict[str, dict[str, Any]]) -> list[str]:
    """The questions that name one speaker, as written and as that speaker asks them."""
    written = asked["as_written"]
    lines = [
        f"  asked in the first person by the one speaker they name (--first-person): {written['answerable']} answerable, "
        f"{written['adversarial']} adversarial"
    ]
    for name, f in (("as written", written), ("by them", asked["by_them"]), ("unnamed", asked["unnamed"])):
        lines.append(
            f"    {name:<10} first citation is evidence {f['first_citation_evidence']:6.1%}   answerable refused "
            f"{f['answerable_refused']:6.1%}   category 5 not in memory {f['adversarial_not_in_memory']:6.1%}   "
            f"evidence read {f['evidence_read']:6.1%}"
        )
    return lines


def _reworded(pair: dict[str, dict[str, Any]]) -> list[str]:
    """The questions that have a hand-written rewording, as LoCoMo asks them and reworded."""
    original = pair["original"]
    lines = [
        f"  reworded questions (lab/data/locomo_paraphrases.json): {original['answerable']} answerable, "
        f"{original['adversarial']} adversarial, asked as written and reworded"
    ]
    for name, f in (("as written", original), ("reworded", pair["reworded"])):
        lines.append(
            f"    {name:<10} first citation is evidence {f['first_citation_evidence']:6.1%}   answerable refused "
            f"{f['answerable_refused']:6.1%}   category 5 not in memory {f['adversarial_not_in_memory']:6.1%}   "
            f"evidence read {f['evidence_read']:6.1%}   ranked first {f['ranked_first_evidence']:6.1%}"
        )
    c = pair["changes"]
    lines.append(
        f"    changed by the rewording (answerable): refused {c['refused_reworded_only']} only reworded, "
        f"{c['refused_as_written_only']} only as written (exact McNemar p {c['refused_p']:.3f}); first citation "
        f"evidence lost {c['first_lost']}, gained {c['first_gained']} (p {c['first_p']:.3f})"
    )
    return lines
