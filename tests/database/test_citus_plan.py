"""``stashbird citus-plan``: the order of the plan on the migrated schema, the skipping of
what Citus already did, the command without the extension.

Citus cannot be installed here. What is proven: the plan's order and co-location, and
that the plan's own statements and its ``pg_dist_partition`` query run (with bound
values) against stand-ins with Citus' names and signatures, in a scratch schema first
on the search path, so that a second run skips what the first did. What is not: that
Citus accepts the calls; that rests on the catalogue rules (test_citus_catalogue.py).
"""

from __future__ import annotations

import uuid

import pytest
from clirun import stashbird
from sqlalchemy import text

from memory import Memory
from memory.store.citus import (
    REFERENCE_TABLES,
    Catalogue,
    ForeignKey,
    Table,
    apply_plan,
    plan_steps,
    read_catalogue,
    read_plan,
)


async def test_reference_tables_first_then_parents_before_children_all_co_located(memory: Memory) -> None:
    async with memory._engine.connect() as connection:
        catalogue = await read_catalogue(connection)
        plan = await read_plan(connection)
    assert plan.citus is None and plan.violations == []
    position = {step.table: i for i, step in enumerate(plan.steps)}
    assert set(position) == set(catalogue.tables) - {"alembic_version"} and len(plan.steps) == len(position)
    assert {s.table for s in plan.steps[: len(REFERENCE_TABLES)]} == REFERENCE_TABLES
    assert all(s.kind == "reference" for s in plan.steps[: len(REFERENCE_TABLES)])
    first, *others = plan.steps[len(REFERENCE_TABLES) :]
    assert first.colocate_with == "none" and all(s.colocate_with == first.table for s in others)
    parent_child = [(k.parent, k.table) for k in catalogue.foreign_keys if k.parent != k.table]
    assert len(parent_child) > 20  # the conversation keys and those between conversation tables
    assert all(position[parent] < position[child] for parent, child in parent_child)
    own = {(k.table, k.name) for k in catalogue.foreign_keys if k.parent == k.table}
    assert {(s.table, key) for s in plan.steps for key in s.self_keys} == own and len(own) >= 3


def test_a_cycle_of_foreign_keys_is_refused() -> None:
    tables = {name: Table(name, 1) for name in ("a", "b")}
    keys = [ForeignKey("ab", "a", "b", (1, 2), (1, 2)), ForeignKey("ba", "b", "a", (1, 2), (1, 2))]
    with pytest.raises(ValueError, match="cycle"):
        plan_steps(Catalogue(tables, [], keys, frozenset(), frozenset()), {})


STAND_INS = """
CREATE TABLE {s}.pg_dist_partition (n serial, logicalrelid regclass, partmethod "char", repmodel "char", colocate_with text);
CREATE TABLE {s}.truncated (table_name regclass);
CREATE FUNCTION {s}.create_reference_table(table_name regclass) RETURNS void LANGUAGE sql
    AS $$ INSERT INTO {s}.pg_dist_partition (logicalrelid, partmethod, repmodel) VALUES (table_name, 'n', 't') $$;
CREATE FUNCTION {s}.truncate_local_data_after_distributing_table(table_name regclass) RETURNS void LANGUAGE sql
    AS $$ INSERT INTO {s}.truncated VALUES (table_name) $$;
CREATE FUNCTION {s}.create_distributed_table(table_name regclass, distribution_column text, colocate_with text)
    RETURNS void LANGUAGE sql
    AS $$ INSERT INTO {s}.pg_dist_partition (logicalrelid, partmethod, colocate_with)
          SELECT table_name, 'h', colocate_with WHERE distribution_column = 'conversation_id' $$;
INSERT INTO {s}.pg_dist_partition (logicalrelid, partmethod, repmodel) VALUES ('public.conversations', 'n', 't');
"""


METHOD = {"reference": "n", "distributed": "h"}  # pg_dist_partition.partmethod


async def test_a_second_run_does_nothing_the_first_did(memory: Memory) -> None:
    schema = f"citus_standin_{uuid.uuid4().hex[:8]}"
    async with memory._engine.connect() as connection:
        try:
            await connection.execute(text(f"CREATE SCHEMA {schema}"))
            for statement in STAND_INS.format(s=schema).split(";\n"):
                if statement.strip():
                    await connection.execute(text(statement))
            await connection.execute(text(f"SET search_path TO {schema}, public"))
            first = await read_plan(connection)
            assert [s.table for s in first.steps if s.done] == ["conversations"]
            await apply_plan(connection, first)
            assert first.applied == [s.table for s in first.steps][1:]
            calls = (
                await connection.execute(
                    text(
                        "SELECT CAST(logicalrelid AS text), CAST(partmethod AS text), colocate_with "
                        f"FROM {schema}.pg_dist_partition ORDER BY n"
                    )
                )
            ).all()
            assert [tuple(call) for call in calls[1:]] == [(s.table, METHOD[s.kind], s.colocate_with) for s in first.steps[1:]]
            second = await read_plan(connection)
            assert all(s.done and s.found == s.kind for s in second.steps)
            await apply_plan(connection, second)
            assert second.applied == []
        finally:
            await connection.rollback()
            await connection.execute(text("RESET search_path"))
            await connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
            await connection.commit()


async def test_the_command_prints_the_plan_and_refuses_to_apply_without_citus(cli_env: None) -> None:
    code, out, _ = stashbird(None, "citus-plan")
    assert code == 0 and out.startswith("citus is not installed in this database: nothing was run")
    assert "SELECT create_reference_table('conversations');" in out
    assert "SELECT create_distributed_table('episodes', 'conversation_id', colocate_with => " in out
    assert "around it: episodes_next_id_fkey, episodes_prev_id_fkey" in out
    code, _, err = stashbird(None, "citus-plan", "--apply")
    assert code == 2 and err.strip().count("\n") == 0 and "citus is not installed" in err
