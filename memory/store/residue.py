"""The residue scan: proof that deleted text survives nowhere.

Every text-like column (text, varchar, char, json, jsonb, text arrays, tsvector) of every
table in the schema is found from the catalogue, not from a list, so a column added
later is scanned too. Tokens matching a pattern are pulled out of each column in one
pass per column; the caller plants unique lowercase alphanumeric markers (which the
English stemmer leaves intact in a tsvector) and checks which survived.

Deliberately store-wide rather than per conversation: it is a verification tool for
tests and benchmarks, and a leak into another conversation's rows must be caught too.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "text[]", "character varying[]", "tsvector")


async def text_columns(session: AsyncSession, schema: str = "public") -> list[tuple[str, str]]:
    """(table, column) of every text-like column of every ordinary table in ``schema``."""
    rows = await session.execute(
        text(
            """
            SELECT c.relname, a.attname
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = :schema AND c.relkind IN ('r', 'p') AND a.attnum > 0
              AND NOT a.attisdropped AND format_type(a.atttypid, NULL) = ANY(:types)
            ORDER BY c.relname, a.attnum
            """
        ),
        {"schema": schema, "types": list(TEXT_TYPES)},
    )
    return [(table, column) for table, column in rows]


async def find_tokens(session: AsyncSession, pattern: str, schema: str = "public") -> dict[str, set[str]]:
    """Every distinct match of the POSIX regex ``pattern`` (case-insensitive) found in any
    text-like column, mapped to the ``table.column`` places it was found."""
    found: dict[str, set[str]] = {}
    for table, column in await text_columns(session, schema):
        rows = await session.execute(
            text(
                f'SELECT DISTINCT lower(m[1]) FROM "{schema}"."{table}" t, '
                f'regexp_matches(t."{column}"::text, :pattern, \'gi\') AS m'
            ),
            {"pattern": f"({pattern})"},
        )
        for (token,) in rows:
            found.setdefault(token, set()).add(f"{table}.{column}")
    return found
