"""``stashbird bench qa``: LoCoMo question answering end to end, for users with an LLM.

For each conversation: ingest the turns, consolidate them (the LLM extractor), answer
every question as ``stashbird ask`` does (decompose, search, rerank, grounded answer),
and grade each answer with an LLM judge following LoCoMo's protocol as used by
published evaluations: the judge sees the question, the gold answer and the generated
answer and says CORRECT or WRONG, generous about wording and about how a date is
expressed as long as it names the same time. The adversarial category (5) has no
answer in the conversation: it is excluded from accuracy and reported as the share of
its questions the system declined ("not in memory"). Prints accuracy by category and
the usage totals (ingestion, retrieval, judge).
"""

from __future__ import annotations

import argparse
import uuid
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel

from bot import locomo
from bot.progress import progress
from bot.runtime import build_llm
from bot.settings import Settings
from lab.bench.common import add_locomo_argument, bench_memory, load_locomo
from memory import ConfigurationError, ConversationRef, Memory, Principal, ask, consolidate, ingest
from memory import usage as usage_of

BENCH = Principal.operator("bench")

ADVERSARIAL = 5

JUDGE_SYSTEM = (
    "You grade answers to questions about a long conversation. You get the question, the "
    "gold answer and a generated answer. Label the generated answer CORRECT if it conveys "
    "the gold answer: be generous with wording and length, and for times accept any "
    "expression that names the same date, month or period as the gold answer. Label it "
    "WRONG if it contradicts the gold answer, misses it, or says it does not know."
)


class Judgement(BaseModel):
    reasoning: str = ""
    label: Literal["CORRECT", "WRONG"]


def configure(parser: argparse.ArgumentParser) -> None:
    add_locomo_argument(parser)
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations (0: all)")
    parser.add_argument("--questions", type=int, default=0, help="only the first N questions of each conversation (0: all)")


async def judge(memory: Memory, question: locomo.Question, generated: str, usage: list[dict[str, Any]]) -> bool:
    """The LLM judge's verdict; its call is added to ``usage`` (the judge is the
    benchmark's, not the conversation's: it stays out of the ledger)."""
    assert memory.llm is not None
    result = await memory.llm.complete_json(
        system=JUDGE_SYSTEM,
        user=f"Question: {question.question}\nGold answer: {question.answer}\nGenerated answer: {generated}",
        schema=Judgement,
        phase="retrieval",
        operation="judge",
    )
    spent = result.usage
    usage.append(
        {
            "phase": spent.phase,
            "operation": spent.operation,
            "calls": spent.calls,
            "prompt_tokens": spent.prompt_tokens,
            "completion_tokens": spent.completion_tokens,
        }
    )
    return result.value.label == "CORRECT"


def _add_usage(totals: dict[tuple[str, str], dict[str, int]], rows: list[dict[str, Any]]) -> None:
    for row in rows:
        entry = totals.setdefault((row["phase"], row["operation"]), {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        for name in entry:
            entry[name] += row[name]


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    llm = build_llm(settings.models)
    if llm is None:
        raise ConfigurationError(
            "bench qa needs an LLM: set STASHBIRD_LLM_BASE_URL and/or STASHBIRD_LLM_API_KEY "
            "(bench retrieval measures retrieval without one)"
        )
    conversations = load_locomo(args.locomo)
    if args.conversations:
        conversations = conversations[: args.conversations]
    run_id = uuid.uuid4().hex[:6]
    graded: dict[int, list[int]] = {}
    declined_adversarial = 0
    usage: dict[tuple[str, str], dict[str, int]] = {}
    try:
        async with bench_memory(settings, "stashbird_bench_qa", llm=llm) as memory:
            for conversation in conversations:
                ref = ConversationRef("bench", run_id, f"qa-{conversation.name}")
                await ingest(memory, ref, [t.message for t in conversation.turns], principal=BENCH)
                await consolidate(memory, ref, principal=BENCH)
                judged: list[dict[str, Any]] = []
                question_date = max(conversation.session_dates.values()) + timedelta(days=1)
                questions = conversation.questions[: args.questions] if args.questions else conversation.questions
                with progress(len(questions), f"qa {conversation.name}") as bar:
                    for question in questions:
                        result = await ask(memory, ref, question.question, principal=BENCH, date=question_date)
                        counts = graded.setdefault(question.category, [0, 0])
                        counts[0] += 1
                        if question.category == ADVERSARIAL:
                            declined_adversarial += not result.in_memory
                        else:
                            counts[1] += await judge(memory, question, result.answer, judged)
                        bar.update(1)
                _add_usage(usage, [*await usage_of(memory, ref, principal=BENCH), *judged])
    finally:
        await llm.close()
    scored = {c: counts for c, counts in graded.items() if c != ADVERSARIAL}
    total = sum(n for n, _ in scored.values())
    correct = sum(k for _, k in scored.values())
    adversarial = graded.get(ADVERSARIAL, [0, 0])[0]
    return {
        "bench": "qa",
        "model": settings.models.llm_model,
        "conversations": len(conversations),
        "questions": sum(n for n, _ in graded.values()),
        "accuracy": round(correct / total, 4) if total else None,
        "correct": correct,
        "graded": total,
        "by_category": {
            str(c): {"questions": n, "correct": k, "accuracy": round(k / n, 4)} for c, (n, k) in sorted(scored.items())
        },
        "adversarial": {"questions": adversarial, "declined": declined_adversarial},
        "usage": [{"phase": p, "operation": o, **figures} for (p, o), figures in sorted(usage.items())],
    }


def render(result: dict[str, Any]) -> str:
    accuracy = "n/a" if result["accuracy"] is None else f"{result['accuracy']:.1%}"
    lines = [
        f"LoCoMo QA with {result['model']}: {result['conversations']} conversations, {result['questions']} questions; "
        f"accuracy {accuracy} ({result['correct']}/{result['graded']}, categories 1-4, LLM judge)",
    ]
    lines += [f"  category {c}: {v['accuracy']:.1%} ({v['correct']}/{v['questions']})" for c, v in result["by_category"].items()]
    adversarial = result["adversarial"]
    lines.append(
        f"  category 5 (adversarial, not scored): declined as not in memory {adversarial['declined']}/{adversarial['questions']}"
    )
    lines.append("usage:")
    lines += [
        f"  {u['phase']:<10} {u['operation']:<18} calls {u['calls']:>6}  prompt {u['prompt_tokens']:>9}  "
        f"completion {u['completion_tokens']:>8}"
        for u in result["usage"]
    ]
    totals = {name: sum(u[name] for u in result["usage"]) for name in ("calls", "prompt_tokens", "completion_tokens")}
    lines.append(
        f"  total: {totals['calls']} calls, {totals['prompt_tokens']} prompt + {totals['completion_tokens']} completion tokens"
    )
    return "\n".join(lines)
