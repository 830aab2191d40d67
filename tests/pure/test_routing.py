"""The routing check (tests/routing.py) flags each shape Citus would not route to one
shard and passes the routed ones. Pure: no database."""

from __future__ import annotations

from typing import Any

import pytest

from tests.routing import MULTI_SHARD, violations

DISTRIBUTED = frozenset({"episodes", "speakers", "relations", "entities", "search_documents", "checkpoints", "job_claims"})


def problems(sql: str, *parameters: Any) -> list[str]:
    return violations(sql, parameters, DISTRIBUTED)


@pytest.mark.parametrize(
    "sql",
    [
        # look-up by id alone
        "SELECT text FROM episodes WHERE id = $1",
        "UPDATE episodes SET next_id = $2 WHERE id = $1",
        "DELETE FROM search_documents WHERE kind = 'episode' AND ref_id = $1",
        # a join on the speaker id alone
        "SELECT e.id FROM episodes e JOIN speakers s ON s.id = e.speaker_id WHERE e.conversation_id = $1",
        # a filter under OR pins nothing
        "SELECT id FROM episodes WHERE conversation_id = $1 OR id = $2",
        # a subquery in WHERE, correlated through the outer table only
        "SELECT e.id FROM episodes e WHERE e.conversation_id = $1 AND EXISTS "
        "(SELECT 1 FROM relations r WHERE r.conversation_id = e.conversation_id AND r.id = e.id)",
        # a scalar subquery in the select list
        "SELECT d.ref_id, (SELECT ep.embedding FROM episodes ep WHERE ep.id = d.ref_id) "
        "FROM search_documents d WHERE d.conversation_id = $1",
        # a FROM subquery, a CTE and a UNION branch
        "SELECT x.id FROM (SELECT id FROM entities) x",
        "WITH top AS (SELECT id FROM entities ORDER BY id DESC LIMIT 1) SELECT id FROM top",
        "SELECT id FROM entities WHERE conversation_id = $1 UNION ALL SELECT id FROM relations",
        # UPDATE ... FROM and DELETE ... USING with an unpinned second table
        "UPDATE episodes e SET text = s.display_name FROM speakers s WHERE e.conversation_id = $1 AND s.id = e.speaker_id",
        "DELETE FROM relations r USING entities x WHERE r.conversation_id = $1 AND x.id = r.subject_id",
        # INSERT ... SELECT from an unpinned source; an insert without the column
        "INSERT INTO relations (conversation_id, fact) SELECT conversation_id, name FROM entities",
        "INSERT INTO speakers (display_name) VALUES ($1)",
        # a row whose conversation is computed, not given
        "INSERT INTO speakers (conversation_id, display_name) VALUES ((SELECT 1), $1)",
    ],
)
def test_flags_what_would_not_route(sql: str) -> None:
    assert problems(sql, 1, 2), sql


def test_flags_a_modifying_cte_even_when_pinned() -> None:
    sql = "WITH gone AS (DELETE FROM episodes WHERE conversation_id = $1 AND id = $2 RETURNING id) SELECT count(*) FROM gone"
    assert any("modifying CTE" in p for p in problems(sql, 1, 2))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT text FROM episodes WHERE conversation_id = $1 AND id = $2",
        "SELECT text FROM episodes WHERE $1 = conversation_id",
        "SELECT text FROM episodes WHERE conversation_id = CAST($1 AS bigint)",
        "SELECT text FROM episodes WHERE conversation_id IN ($1)",
        "SELECT text FROM episodes WHERE conversation_id = 7",
        "SELECT e.id FROM episodes e JOIN speakers s ON s.conversation_id = e.conversation_id AND s.id = e.speaker_id "
        "WHERE e.conversation_id = $1",
        "SELECT e.id FROM episodes e JOIN speakers s USING (conversation_id) WHERE e.conversation_id = $1",
        "SELECT e.id FROM episodes e, speakers s WHERE s.conversation_id = e.conversation_id AND e.conversation_id = $1",
        "SELECT e.id FROM episodes e WHERE e.conversation_id = $1 AND EXISTS "
        "(SELECT 1 FROM relations r WHERE r.conversation_id = $1 AND r.id = e.id)",
        "WITH top AS (SELECT id FROM entities WHERE conversation_id = $1) SELECT id FROM top",
        "SELECT id FROM entities WHERE conversation_id = $1 UNION ALL SELECT id FROM relations WHERE conversation_id = $1",
        "UPDATE episodes e SET text = s.display_name FROM speakers s "
        "WHERE e.conversation_id = $1 AND s.conversation_id = e.conversation_id AND s.id = e.speaker_id",
        "DELETE FROM search_documents WHERE conversation_id = $1 AND kind = 'episode' AND ref_id = $2",
        "INSERT INTO relations (conversation_id, fact) SELECT conversation_id, name FROM entities WHERE conversation_id = $1",
        "INSERT INTO speakers (conversation_id, display_name) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING id",
        "SELECT k.summary FROM checkpoints k WHERE k.conversation_id = $1 FOR UPDATE",
        # no distributed table: a reference table, the catalogue, DDL
        "SELECT id FROM conversations WHERE platform = $1",
        "SELECT relname FROM pg_class WHERE relkind = 'r'",
        "ALTER TABLE episodes ADD COLUMN x int",
        "ANALYZE search_documents",
        # a CTE's name is not a table, even when a table has that name
        "WITH entities AS (SELECT 1 AS id) SELECT id FROM entities",
    ],
)
def test_passes_routed_statements(sql: str) -> None:
    assert problems(sql, 1, 1) == [], sql


def test_any_routes_with_one_value_only() -> None:
    sql = "SELECT id FROM episodes WHERE conversation_id = ANY($1)"
    assert problems(sql, [5]) == []
    assert problems(sql, [5, 6]) and problems(sql, [])


def test_every_pin_must_name_the_same_conversation() -> None:
    sql = (
        "SELECT e.id FROM episodes e JOIN speakers s ON s.id = e.speaker_id "
        "WHERE e.conversation_id = $1 AND s.conversation_id = $2"
    )
    assert problems(sql, 3, 3) == []
    assert problems(sql, 3, 4)


def test_multi_row_inserts_route_when_every_row_names_one_conversation() -> None:
    values = "INSERT INTO speakers (conversation_id, display_name) VALUES ($1, $2), ($3, $4)"
    assert problems(values, 1, "a", 1, "b") == []
    assert problems(values, 1, "a", 2, "b")
    # as SQLAlchemy writes a multi-row insert that returns rows in order
    sentinel = (
        "INSERT INTO speakers (conversation_id, display_name) SELECT p0::BIGINT, p1::VARCHAR FROM "
        "(VALUES ($1, $2, 0), ($3, $4, 1)) AS imp_sen(p0, p1, sen_counter) ORDER BY sen_counter RETURNING speakers.id"
    )
    assert problems(sentinel, 1, "a", 1, "b") == []
    assert problems(sentinel, 1, "a", 2, "b")


def test_only_listed_multi_shard_reads_pass() -> None:
    listed = next(iter(MULTI_SHARD))
    assert problems(f"/* multi-shard: {listed} */ SELECT count(*) FROM episodes") == []
    assert problems("/* multi-shard: whatever */ SELECT count(*) FROM episodes")
    assert all(reason.strip() for reason in MULTI_SHARD.values())
