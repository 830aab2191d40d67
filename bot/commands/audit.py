"""``stashbird audit conversations|about|explain|forgotten|provenance|stats|report``:
what the memory holds about a conversation and why, as tables for people or JSON.

The command line runs as the operator (it has database access anyway) and says so; the
same queries refuse a chat user who is not an admin of the conversation.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot import audit_report
from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import (
    ConversationRef,
    Memory,
    Principal,
    ValidationError,
    about,
    audit_conversations,
    explain,
    forgotten,
    overview,
    parse_time,
    provenance,
    stats,
    store_audit,
)

OPERATOR = Principal.operator("cli")
AS_OPERATOR = "as the operator (operator:cli; the command line has database access): every conversation may be audited"

QUERIES = {
    "conversations": "every conversation in memory, with its message count",
    "about": "entities matching a name: their facts, current and superseded, with the messages behind them",
    "explain": "a stored answer's trace: question, sub-queries, times, evidence with scores and messages, usage",
    "forgotten": (
        "the deletion log: when, which message, who asked, what it removed, kept, anchored, restored; without "
        "--conversation, the store-wide log: dropped conversations, people forgotten, store-wide commands, who asked"
    ),
    "provenance": "everything derived from one message, and what deleting it would do (a dry run)",
    "stats": "messages, speakers, entities, anchors, relations, communities, consolidation lag, usage",
    "report": "write one self-contained HTML report: entity graph, facts and history, deletions, usage",
}


def configure(parser: argparse.ArgumentParser) -> None:
    queries = parser.add_subparsers(dest="query", required=True)
    subs = {}
    for name, help_text in QUERIES.items():
        sub = queries.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        if name != "conversations":
            sub.add_argument(
                "--conversation", required=name != "forgotten", help="conversation name, or platform:workspace:channel"
            )
        subs[name] = sub
    subs["about"].add_argument("name", help="a name (fuzzy and by meaning)")
    subs["explain"].add_argument("answer_id", type=int, help="the answer's trace id (printed by `stashbird ask`)")
    subs["forgotten"].add_argument("--since", help="ISO 8601 date or time (default: the whole log)")
    subs["provenance"].add_argument("--message", required=True, help="the platform message id")
    subs["report"].add_argument("--out", required=True, type=Path, help="the HTML file to write")


async def _query(memory: Memory, args: argparse.Namespace) -> dict[str, Any]:
    if args.query == "conversations":
        return {"conversations": [c.as_dict() for c in await audit_conversations(memory, principal=OPERATOR)]}
    if args.query == "forgotten" and args.conversation is None:
        since = parse_time(args.since, "since") if args.since else None
        return {"store_wide": True, **(await store_audit(memory, principal=OPERATOR, since=since)).as_dict()}
    ref = ConversationRef.parse(args.conversation)
    if args.query == "about":
        return (await about(memory, ref, args.name, principal=OPERATOR)).as_dict()
    if args.query == "explain":
        return (await explain(memory, ref, args.answer_id, principal=OPERATOR)).as_dict()
    if args.query == "forgotten":
        since = parse_time(args.since, "since") if args.since else None
        return (await forgotten(memory, ref, principal=OPERATOR, since=since)).as_dict()
    if args.query == "provenance":
        return (await provenance(memory, ref, args.message, principal=OPERATOR)).as_dict()
    if args.query == "stats":
        return (await stats(memory, ref, principal=OPERATOR)).as_dict()
    return await _report(memory, ref, args.out)


async def _report(memory: Memory, ref: ConversationRef, out: Path) -> dict[str, Any]:
    if not out.parent.is_dir():
        raise ValidationError("out", f"no folder {str(out.parent)!r} to write the report in")
    data = (await overview(memory, ref, principal=OPERATOR)).as_dict()
    out.write_text(audit_report.render_report(data, datetime.now(UTC)), encoding="utf-8")
    return {
        "conversation": str(ref),
        "out": str(out),
        "entities": len(data["entities"]),
        "facts": len(data["facts"]),
        "deletions": len(data["deletions"]),
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    async with memory_from_settings(settings) as memory:
        result = await _query(memory, args)
    return {"audit": args.query, "principal": str(OPERATOR), **result}


# --- human output --------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int = 70) -> list[str]:
    """Plain-text columns, each as wide as its widest cell (cut at ``width``). Pure."""
    cells = [[_cell(v, width) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    return [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        line,
        *("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells),
    ]


def _cell(value: Any, width: int) -> str:
    text = "" if value is None else " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(value: str | None) -> str:
    return value[:16].replace("T", " ") if value else ""


def _messages(messages: list[dict[str, Any]], indent: str = "      ") -> list[str]:
    return [
        f"{indent}[{m['platform_message_id']}] {m['speaker']}, {_when(m['time'])}: {_cell(m['text'], 100)}"
        + (f" <{m['permalink']}>" if m["permalink"] else "")
        for m in messages
    ]


def _fact_lines(fact: dict[str, Any]) -> list[str]:
    head = f"    #{fact['id']} {fact['fact']}  ({fact['subject']} —{fact['predicate']}→ {fact['object']})"
    if fact["status"] == "superseded":
        head += f"\n      superseded {_when(fact['superseded_at'])} by #{fact['superseded_by']}: {fact['superseded_by_fact']}"
    more = fact["message_count"] - len(fact["messages"])
    return [head, *_messages(fact["messages"]), *([f"      … and {more} more messages"] if more > 0 else [])]


def render_about(result: dict[str, Any]) -> list[str]:
    if not result["entities"]:
        return [f"nothing in memory matches {result['query']!r}"]
    lines: list[str] = []
    for e in result["entities"]:
        kind = "connective anchor" if e["is_anchor"] else e["type"]
        lines.append(f"{e['name']} ({kind}, entity #{e['id']}, match {e['match']:.2f}, mentioned in {e['mentions']} messages)")
        if e["summary"]:
            lines.append(f"  summary: {e['summary']}")
        lines.append(f"  current facts ({len(e['current'])}):")
        lines += [line for f in e["current"] for line in _fact_lines(f)]
        if e["superseded"]:
            lines.append(f"  superseded facts ({len(e['superseded'])}):")
            lines += [line for f in e["superseded"] for line in _fact_lines(f)]
        if e["relation_count"] > len(e["current"]) + len(e["superseded"]):
            lines.append(f"  ({e['relation_count']} relations in all; the newest are shown)")
    return lines


def render_explain(result: dict[str, Any]) -> list[str]:
    lines = [
        f"answer #{result['answer_id']} to {result['asked_by']} at {_when(result['asked_at'])}",
        f"  question: {result['question']}",
    ]
    lines += [f"  sub-query: {q}" for q in result["sub_queries"]]
    lines += [
        f"  time: {r['expression']!r} = {_when(r['start'])} .. {_when(r['end'])}"
        for r in result["retrieval"].get("time_ranges", [])
    ]
    if result["withdrawn"]:
        lines.append("  answer: WITHDRAWN: a message it drew on was deleted or edited")
        lines += [
            f"    {w['action']} of message {w['platform_message_id']} at {_when(w['at'])}" for w in result["withdrawn_because"]
        ]
    else:
        lines.append(f"  answer: {result['answer']}")
    rows = [
        (
            e["label"],
            e["kind"],
            e["ref_id"],
            f"{e['score']:.4f}",
            f"{e['similarity']:.3f}",
            f"{e['text_rank']:.3f}",
            e["text"] if e["text"] is not None else "(removed since)",
        )
        for e in result["evidence"]
    ]
    lines += ["", *table(["label", "kind", "id", "score", "cosine", "text rank", "text"], rows)]
    usage = [(op, u["model"], u["calls"], u["prompt_tokens"], u["completion_tokens"]) for op, u in result["usage"].items()]
    return lines + ["", *table(["operation", "model", "calls", "prompt", "completion"], usage)]


def render_forgotten(result: dict[str, Any]) -> list[str]:
    if result.get("store_wide"):
        return render_store_log(result)
    rows = [
        (
            _when(f["at"]),
            f["action"],
            f["message"],
            f["status"],
            f["requested_by"],
            *(f["counts"].get(k, 0) for k in ("relations_removed", "relations_kept", "entities_anchored", "relations_restored")),
        )
        for f in result["entries"]
    ]
    since = f" since {result['since']}" if result["since"] else ""
    lines = (
        table(["when", "action", "what", "status", "requested by", "removed", "kept", "anchored", "restored"], rows)
        if rows
        else [f"nothing forgotten{since}"]
    )
    if result["people"]:
        lines += ["", "people of its workspace forgotten, opted out or back in:", *_store_rows(result["people"])]
    return lines


def _store_rows(entries: list[dict[str, Any]]) -> list[str]:
    rows = [(_when(e["at"]), e["action"], e["about"], e["summary"], e["requested_by"], e["principal"]) for e in entries]
    return table(["when", "action", "about", "what", "requested by", "principal"], rows)


def render_store_log(result: dict[str, Any]) -> list[str]:
    if not result["entries"]:
        return ["nothing in the store-wide audit log" + (f" since {result['since']}" if result["since"] else "")]
    return _store_rows(result["entries"])


def render_provenance(result: dict[str, Any]) -> list[str]:
    if result["status"] == "deleted":
        return [f"message {result['platform_message_id']} was deleted: nothing is derived from it any more"]
    m = result["message"]
    lines = [f"message {m['platform_message_id']} by {m['speaker']} at {_when(m['time'])}: {m['text']}", ""]
    rows = [(d["kind"], d["id"], d["text"], d["status"], d["other_support"]) for d in result["entities"] + result["relations"]]
    lines += table(["derived", "id", "name / fact", "status", "other messages"], rows)
    lines += [
        f"in the conversation summary: {'yes' if result['in_summary'] else 'no'}; rolling context entries: "
        f"{result['context_entries']}; answers that used it: {result['answers'] or 'none'}",
        "",
        "dry run: deleting it would remove, keep, anchor, restore and dirty:",
    ]
    dry = result["dry_run"]
    return lines + [f"  {k}: {dry[k]}" for k in dry if k != "counts"]


def render_stats(result: dict[str, Any]) -> list[str]:
    rows = [
        (k.replace("_", " "), _when(result[k]) if k == "consolidated_at" else result[k])
        for k in result
        if k not in ("audit", "principal", "conversation", "usage")
    ]
    usage = [(u["phase"], u["calls"], u["prompt_tokens"], u["completion_tokens"]) for u in result["usage"]]
    return [
        *table(["", result["conversation"]], rows),
        "",
        *table(["phase", "calls", "prompt tokens", "completion tokens"], usage),
    ]


def render_conversations(result: dict[str, Any]) -> list[str]:
    rows = [
        (c["conversation"], c["messages"], _when(c["last_message_at"]), _when(c["created_at"])) for c in result["conversations"]
    ]
    return table(["conversation", "messages", "last message", "created"], rows)


def render_written(result: dict[str, Any]) -> list[str]:
    return [f"wrote {result['out']}: {result['entities']} entities, {result['facts']} facts, {result['deletions']} deletions"]


RENDER = {
    "conversations": render_conversations,
    "about": render_about,
    "explain": render_explain,
    "forgotten": render_forgotten,
    "provenance": render_provenance,
    "stats": render_stats,
    "report": render_written,
}


def render(result: dict[str, Any]) -> str:
    return "\n".join([AS_OPERATOR, *RENDER[result["audit"]](result)])
