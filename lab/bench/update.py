"""``stashbird bench update``: the update-reconciliation study.

Replays supplied extractions session by session, each session a batch consolidated by
a fresh run from the saved checkpoint, over 20 sequences: the ten LoCoMo conversations
(extractions derived by code from the annotations: one fact per question, stated by its
evidence turns, so facts resting on several turns are restated across sessions) and ten
correction sequences (lab/bench/correction_sequences.py). The final state of each
sequence passes when:

- no duplicate active relations (two active relations with the same subject, predicate
  and fact);
- no superseded relation left active (a fact a later message contradicted);
- every relation's provenance is exactly the episodes that stated it (and every stated
  fact is there).

``--no-reconcile`` appends every extraction as new, to show that the checks can fail.
"""

from __future__ import annotations

import argparse
import re
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, cast

from bot import locomo
from bot.runtime import build_embedder
from bot.settings import Settings
from lab.bench.common import add_locomo_argument, bench_memory, load_locomo
from lab.bench.correction_sequences import SEQUENCES
from lab.probes import normalize_name, normalize_predicate
from memory import ConversationRef, Memory, Message, Principal, ReplayExtractor, consolidate, facts, ingest

BENCH = Principal.operator("bench")

Key = tuple[str, str, str]
T0 = datetime(2025, 1, 6, 9, tzinfo=timezone.utc)


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)
    parser.add_argument("--no-reconcile", action="store_true", help="append every extraction as new (the baseline)")


def key_of(relation: dict[str, Any]) -> Key:
    """What identifies a stated fact: subject, predicate and fact sentence. Not the
    object's name: entity reconciliation may rightly file the object under the name of
    the entity it merged into ("volunteered at a homeless shelter" into "volunteering at
    a homeless shelter"); the fact sentence still says what was stated."""
    return (
        normalize_name(relation["subject"]),
        normalize_predicate(relation["predicate"]),
        normalize_name(relation["fact"]),
    )


# --- the sequences: batches of messages with their supplied extractions --------------


class UpdateSequence:
    def __init__(self, name: str, batches: list[list[Message]], records: list[dict[str, Any]]) -> None:
        self.name, self.batches, self.records = name, batches, records


_WH = re.compile(r"^\s*(what|when|where|who|whom|which|why|how|would|did|does|is|was|has|are)\b", re.IGNORECASE)


def locomo_sequence(conversation: locomo.Conversation) -> UpdateSequence:
    """One fact per annotated question: subject the speaker it asks about, object its
    answer, provenance its evidence turns (ids that do not exist are left out). The first
    statement of a fact is ``new``, every later one ``duplicate``."""
    turns = {t.dia_id: t for t in conversation.turns}
    order = {t.dia_id: i for i, t in enumerate(conversation.turns)}
    stated: dict[str, list[dict[str, Any]]] = {}
    seen: set[Key] = set()
    facts = []
    for question in conversation.questions:
        evidence = sorted({e for e in question.evidence if e in turns}, key=order.__getitem__)
        answer = " ".join(question.answer.split())[:80]
        if not evidence or not answer:
            continue
        about = [s for s in conversation.speakers if s.lower() in question.question.lower()]
        subject = about[0] if about else turns[evidence[0]].message.speaker_name
        wh = _WH.match(question.question)
        predicate = f"answers_{wh.group(1).lower() if wh else 'other'}"
        facts.append(
            (
                evidence,
                {"subject": subject, "predicate": predicate, "object": answer, "fact": f"{question.question.strip()} {answer}"},
            )
        )
    for evidence, fact in sorted(facts, key=lambda item: order[item[0][0]]):
        for dia_id in evidence:
            decision = "duplicate" if key_of(fact) in seen else "new"
            seen.add(key_of(fact))
            stated.setdefault(dia_id, []).append({**fact, "decision": decision})
    records = [
        {"message_id": dia_id, "entities": [], "relations": relations}
        for dia_id, relations in sorted(stated.items(), key=lambda item: order[item[0]])
    ]
    sessions: dict[int, list[Message]] = {}
    for turn in conversation.turns:
        sessions.setdefault(turn.session, []).append(turn.message)
    return UpdateSequence(f"locomo-{conversation.name}", [sessions[s] for s in sorted(sessions)], records)


def correction_sequence(name: str, sessions: list[list[tuple[str, str, list[dict[str, Any]]]]]) -> UpdateSequence:
    batches: list[list[Message]] = []
    records = []
    for day, session in enumerate(sessions):
        batch = []
        for index, (speaker, text, relations) in enumerate(session):
            message_id = f"{name}-{day}-{index}"
            batch.append(Message(message_id, speaker, speaker, text, T0 + timedelta(days=day, minutes=index)))
            records.append({"message_id": message_id, "entities": [], "relations": relations})
        batches.append(batch)
    return UpdateSequence(name, batches, records)


# --- expected and actual outcome ------------------------------------------------------


def expected(records: list[dict[str, Any]]) -> tuple[dict[Key, set[str]], set[Key]]:
    """From the supplied extractions in order: which messages state each fact, and which
    facts a later contradiction replaced (the active fact of the same subject and predicate)."""
    stated: dict[Key, set[str]] = {}
    active: set[Key] = set()
    replaced: set[Key] = set()
    for record in records:
        for relation in record["relations"]:
            key = key_of(relation)
            stated.setdefault(key, set()).add(record["message_id"])
            if relation.get("decision") == "contradiction":
                gone = {k for k in active if k[:2] == key[:2] and k != key}
                replaced |= gone
                active -= gone
            active.add(key)
            replaced.discard(key)
    return stated, replaced


async def actual(memory: Memory, ref: ConversationRef) -> list[dict[str, Any]]:
    """Every relation (superseded ones too) with its key, status and supporting messages."""
    return [
        {"key": key_of(fact), "status": fact["status"], "support": set(cast(list[str], fact["messages"]))}
        for fact in await facts(memory, ref, principal=BENCH)
    ]


def checks(relations: list[dict[str, Any]], stated: dict[Key, set[str]], replaced: set[Key]) -> dict[str, Any]:
    active = Counter(r["key"] for r in relations if r["status"] == "active")
    duplicates = sum(n - 1 for n in active.values() if n > 1)
    stale = sum(1 for r in relations if r["status"] == "active" and r["key"] in replaced)
    wrong = sum(1 for r in relations if r["support"] != stated.get(r["key"]))
    missing = len(set(stated) - {r["key"] for r in relations})
    return {
        "no_duplicate_active": duplicates == 0,
        "no_stale_active": stale == 0,
        "provenance_exact": wrong == 0 and missing == 0,
        "duplicate_active": duplicates,
        "stale_active": stale,
        "wrong_provenance": wrong,
        "missing_facts": missing,
    }


async def run_sequence(memory: Memory, sequence: UpdateSequence, run_id: str, reconcile: bool) -> dict[str, Any]:
    ref = ConversationRef("bench", run_id, sequence.name)
    for batch in sequence.batches:
        await ingest(memory, ref, batch, principal=BENCH)
        # a fresh run per batch: all it knows comes from the saved checkpoint
        await consolidate(
            memory, ref, principal=BENCH, extractor=ReplayExtractor.from_records(sequence.records), reconcile=reconcile
        )
    relations = await actual(memory, ref)
    stated, replaced = expected(sequence.records)
    result = checks(relations, stated, replaced)
    return {
        "sequence": sequence.name,
        "batches": len(sequence.batches),
        "facts": len(stated),
        "relations": len(relations),
        "superseded": sum(r["status"] == "superseded" for r in relations),
        "passed": result["no_duplicate_active"] and result["no_stale_active"] and result["provenance_exact"],
        **result,
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    sequences = [locomo_sequence(c) for c in load_locomo(args.locomo)]
    sequences += [correction_sequence(name, sessions) for name, sessions in SEQUENCES.items()]
    run_id = uuid.uuid4().hex[:6]
    async with bench_memory(settings, "stashbird_bench_update", build_embedder(settings.models)) as memory:
        results = [await run_sequence(memory, s, run_id, not args.no_reconcile) for s in sequences]
    return {
        "bench": "update",
        "reconcile": not args.no_reconcile,
        "sequences": results,
        "passed": sum(r["passed"] for r in results),
        "total": len(results),
        "reference": {"paper_with_reconciliation": "20/20", "paper_without": "8/20"},
    }


def render(result: dict[str, Any]) -> str:
    mark = {True: "pass", False: "FAIL"}
    lines = [
        f"update reconciliation ({'on' if result['reconcile'] else 'OFF'}): sequence, batches, facts, relations, "
        "superseded | no duplicate active | no stale active | provenance exact"
    ]
    for r in result["sequences"]:
        lines.append(
            f"  {r['sequence']:<22} {r['batches']:>3} {r['facts']:>4} {r['relations']:>4} {r['superseded']:>3} | "
            f"{mark[r['no_duplicate_active']]:<4} ({r['duplicate_active']}) | "
            f"{mark[r['no_stale_active']]:<4} ({r['stale_active']}) | "
            f"{mark[r['provenance_exact']]:<4} ({r['wrong_provenance']} wrong, {r['missing_facts']} missing) "
            f"-> {mark[r['passed']]}"
        )
    lines.append(
        f"passed {result['passed']}/{result['total']} "
        f"(paper: {result['reference']['paper_with_reconciliation']} with reconciliation, "
        f"{result['reference']['paper_without']} without)"
    )
    return "\n".join(lines)
