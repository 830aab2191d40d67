"""``stashbird citus-plan [--dry-run | --apply]``: shard the memory on Citus by
conversation (memory.store.citus says which tables are reference tables and why).

On a database with the ``citus`` extension it runs, in order, ``create_reference_table``
for the reference tables and ``create_distributed_table(table, 'conversation_id',
colocate_with => ...)`` for every other table, parents before children, all co-located
with the first, each in its own transaction with
``citus.enable_local_reference_table_foreign_keys`` off (Citus would otherwise turn the
tables that point at a new reference table into Citus local tables). A table Citus
already has as the step makes it (in ``pg_dist_partition``) is skipped, so a run that
failed half way resumes where it stopped and a second run does nothing. Citus local
tables (what an older plan left) are made plain tables again first, with the tables
their foreign keys reach, and distributed like the others. A table's foreign keys to
itself (the episodes' chain, a relation's successor) are dropped and added again
around its step, in its transaction: Citus copies a large table into a shard in
several COPYs, each checked alone. Last, the shards' shared vector index is built when
the database has none (one server's schema has none: memory.store.vector_indexes).
Without the extension, or with ``--dry-run``, it prints
the statements it would run and changes nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from bot.runtime import memory_from_settings
from bot.settings import Settings
from memory import Principal, citus_plan


def configure(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the statements only (the default without citus)")
    mode.add_argument("--apply", action="store_true", help="run the statements (the default with citus)")
    parser.add_argument("--principal", default="cli", help="who asks, for the log")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    principal = Principal.operator(args.principal)
    async with memory_from_settings(settings) as memory:
        plan = await citus_plan(memory, principal=principal)
        applying = args.apply or (not args.dry_run and plan.citus is not None)
        if applying:
            plan = await citus_plan(memory, principal=principal, apply=True)
    return {**plan.to_dict(), "dry_run": not applying}


def _state(step: dict[str, Any]) -> str:
    if step["done"]:
        return f"  -- already done (a {step['found']} table)"
    keys = f"  -- its foreign keys to itself dropped and added again around it: {', '.join(step['self_keys'])}"
    if step["found"]:
        return f"  -- a Citus {step['found']} table now (made a plain table again first)" + (keys if step["self_keys"] else "")
    return keys if step["self_keys"] else ""


def render(result: dict[str, Any]) -> str:
    if result["citus"] is None:
        head = "citus is not installed in this database: nothing was run. The plan, for a coordinator with citus:"
    elif result["dry_run"]:
        head = f"citus {result['citus']}: dry run, nothing was run. The plan:"
    else:
        head = f"citus {result['citus']}: {len(result['applied'])} tables distributed or made reference tables now."
    lines = [head]
    for step in result["steps"]:
        lines.append(f"{step['sql']}{_state(step)}")
    built = "already done" if result["shared_index"] else "the shards' vector index, built last"
    lines.append(f"{result['shared_index_sql']}  -- {built}")
    lines += [f"rule broken: {v}" for v in result["violations"]]
    return "\n".join(lines)
