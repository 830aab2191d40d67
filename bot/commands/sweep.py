"""``stashbird sweep``: forget stored messages of the last N days that the platform no
longer has (deletions whose events never arrived), then vacuum as ``stashbird forget``
does when anything was forgotten; ``stashbird serve`` runs it every STASHBIRD_SWEEP_HOURS
(and its VACUUM after deletions)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from bot.commands.forget import render_vacuum
from bot.runtime import memory_from_settings
from bot.service import build_connectors, service_config, sweep_all
from bot.settings import Settings
from connectors.service import ChatService
from connectors.sweep import SWEEP
from memory import StashbirdError, vacuum


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=int, help="how far back to check (default STASHBIRD_SWEEP_DAYS, 7)")
    parser.add_argument("--no-vacuum", action="store_true", help="skip the VACUUM of the memory tables afterwards")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    days = args.days if args.days is not None else settings.chat.sweep_days
    if days < 1:
        raise StashbirdError("--days must be at least 1")
    async with memory_from_settings(settings) as memory:
        _, connectors = build_connectors(ChatService(memory, config=service_config(settings.chat)), settings)
        if not connectors:
            raise StashbirdError("no platform configured: set SLACK_BOT_TOKEN (or DISCORD_BOT_TOKEN)")
        reports = await sweep_all(memory, connectors, days)
        removed = any(r.forgotten or r.dropped for r in reports)
        vacuumed = await vacuum(memory, principal=SWEEP) if removed and not args.no_vacuum else None
    return {"days": days, "conversations": [r.as_dict() for r in reports], "vacuum": asdict(vacuumed) if vacuumed else None}


def render(result: dict[str, Any]) -> str:
    lines = [f"swept the last {result['days']} days:"]
    for report in result["conversations"]:
        if report.get("dropped"):
            lines.append(f"  {report['conversation']}: the channel no longer exists; its memory was dropped")
            continue
        gone = ", ".join(report["forgotten"]) or "nothing"
        lines.append(f"  {report['conversation']}: {report['checked']} checked, forgotten: {gone}")
        lines += [f"  {report['conversation']}: REFUSED: {report['refused']}"] if report.get("refused") else []
    return "\n".join([*lines, *render_vacuum(result)])
