"""``stashbird jobs status|run-once|run``: the background work.

- ``status [--conversation C]``: per conversation the consolidation lag (age of the
  oldest waiting message, waiting tokens), dirty communities, a dirty running summary,
  and the last run of each job with its result.
- ``run-once [--conversation C]``: every due job once, then exit (cron, tests).
- ``run``: the scheduler alone in the foreground until SIGINT or SIGTERM; then it stops
  taking work and leaves unfinished items claimable.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from datetime import UTC, datetime
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from jobs import Scheduler
from memory import ConversationRef, Memory, Principal, backlog, last_runs, resolve_conversation

OPERATOR = Principal.operator("cli")


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    for name, help_text in (
        ("status", "waiting work per conversation and the last run of each job"),
        ("run-once", "run every due job once and exit"),
        ("run", "run the scheduler in the foreground until interrupted"),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON")
        if name != "run":
            action.add_argument("--conversation", help="only this conversation (name, or platform:workspace:channel)")


async def _only(memory: Memory, args: argparse.Namespace) -> frozenset[int] | None:
    if not getattr(args, "conversation", None):
        return None
    return frozenset({await resolve_conversation(memory, ConversationRef.parse(args.conversation), principal=OPERATOR)})


async def _status(memory: Memory, conversation: str | None) -> dict[str, Any]:
    ref = ConversationRef.parse(conversation) if conversation else None
    items = await backlog(memory, principal=OPERATOR, conversation=ref)
    runs = await last_runs(memory, [item.conversation_id for item in items], principal=OPERATOR)
    now = datetime.now(UTC)
    rows = []
    for item in items:
        last = {
            run.job: {"status": run.status, "owner": run.owner, "finished_at": run.finished_at, "result": run.result}
            for (cid, _), run in sorted(runs.items())
            if cid == item.conversation_id
        }
        lag = (now - item.oldest_unconsolidated).total_seconds() if item.oldest_unconsolidated else 0.0
        rows.append({**item.as_dict(), "consolidation_lag_seconds": round(lag, 1), "last_runs": last})
    return {"action": "status", "conversations": rows}


async def _run(scheduler: Scheduler) -> dict[str, Any]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await scheduler.prepare()  # "running" means ready: the first item is not late for a model load
    scheduler.start()
    print(f"scheduler {scheduler.owner} running {', '.join(scheduler.jobs)}", file=sys.stderr, flush=True)
    await stop.wait()
    await scheduler.shutdown()
    return {"action": "run", "owner": scheduler.owner, "stopped": True}


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    async with memory_from_settings(settings) as memory:
        if args.action == "status":
            return await _status(memory, args.conversation)
        scheduler = Scheduler(memory, settings.jobs, only=await _only(memory, args))
        if args.action == "run":
            return await _run(scheduler)
        results = await scheduler.run_once()
        return {"action": "run-once", "owner": scheduler.owner, "items": [vars(r) for r in results]}


def _render_status(result: dict[str, Any]) -> str:
    lines = []
    for row in result["conversations"]:
        lines.append(
            f"{row['conversation']}: {row['unconsolidated_messages']} messages waiting "
            f"(~{row['unconsolidated_tokens']} tokens, oldest {row['consolidation_lag_seconds']:.0f}s), "
            f"{row['dirty_communities']} dirty communities ({row['warm_communities']} warm, the rest cold)"
            + (", graph changed since the last community pass" if row["graph_changed"] else "")
            + (", summary to rebuild" if row["summary_dirty"] else "")
        )
        for job, run in row["last_runs"].items():
            lines.append(f"  {job}: {run['status']} at {run['finished_at'] or '-'} by {run['owner']}")
    return "\n".join(lines) or "no conversations"


def render(result: dict[str, Any]) -> str:
    if result["action"] == "status":
        return _render_status(result)
    if result["action"] == "run":
        return f"scheduler {result['owner']} stopped"
    done = [item for item in result["items"] if item["status"] != "skipped"]
    lines = [f"{len(done)} items run ({len(result['items']) - len(done)} held by other processes)"]
    lines += [f"  {item['job']} of conversation {item['conversation_id']}: {item['status']}" for item in done]
    return "\n".join(lines)
