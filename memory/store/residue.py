"""The residue scans: proof that deleted text survives nowhere.

Every text-like column (text, varchar, char, json, jsonb, text arrays, tsvector) of every
table in the schema is found from the catalogue, not from a list, so a column added
later is scanned too.

- ``find_tokens`` pulls tokens matching a pattern out of every column, store-wide (a
  leak into another conversation's rows is caught too); the caller plants unique
  lowercase alphanumeric markers (which the English stemmer leaves whole in a tsvector).
- ``word_residue`` checks words, not planted markers: every word of the deleted (or
  edited-away) texts that no surviving message of the conversation uses must appear in
  none of the conversation's rows. Words are runs of letters and digits, lower-cased
  (so ``lives_in`` holds "lives" and "in"); JSON is searched in its string values (keys
  are the schema's, not a message's); a tsvector in its lexemes, for the candidate
  words whose English stem no surviving word shares. The surviving vocabulary is the
  conversation's surviving messages, its speakers' names (the platform's, not a
  message's) and the questions asked of it (the asker's own words, kept on purpose).
  Columns that hold only identifiers or the code's own vocabulary (``NOT_WORDS``) and
  the words the code writes itself (``STORE_WORDS``) are left out: a deleted message
  that happened to say "deleted" is not found again in the audit log's status.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "text[]", "character varying[]", "tsvector")
NOT_WORDS = frozenset(
    {
        ("alembic_version", "version_num"),
        ("store_settings", "key"),
        ("store_settings", "value"),
        ("conversations", "platform"),
        ("conversations", "workspace_id"),
        ("conversations", "channel_id"),
        ("speakers", "platform_user_id"),
        ("speakers", "role"),
        ("episodes", "role"),
        ("episodes", "platform_message_id"),
        ("episodes", "reply_to"),
        ("episodes", "thread_id"),
        ("tombstones", "platform_message_id"),
        ("relations", "status"),
        ("search_documents", "kind"),
        ("usage_ledger", "phase"),
        ("usage_ledger", "operation"),
        ("usage_ledger", "model"),
        ("audit_log", "principal"),
        ("audit_log", "action"),
        ("answer_traces", "principal"),
        # The store-wide log (migration 0018) is no conversation's: it names commands,
        # principals, workspaces, ids and counts (memory/store/audit.py), never a
        # message's words, and a conversation's scan would read every other's rows.
        ("store_audit_log", "principal"),
        ("store_audit_log", "action"),
        ("store_audit_log", "platform"),
        ("store_audit_log", "workspace_id"),
        ("store_audit_log", "channel_id"),
        ("store_audit_log", "details"),
    }
)
# Audit statuses, the anchor name and the withdrawn-answer notice (memory.forgetting.deletion).
STORE_WORDS = frozenset(
    "deleted tombstoned already edited unchanged unknown anchor answer withdrawn a message it drew on was or".split()
)
_WORD = re.compile(r"[^\W_]+")


def words(value: str) -> set[str]:
    """The lower-cased runs of letters and digits of ``value``."""
    return set(_WORD.findall(value.lower()))


def unique_words(gone: Iterable[str], surviving: Iterable[str], ignore: Iterable[str] = ()) -> set[str]:
    """Words of the ``gone`` texts that no ``surviving`` text uses, less ``ignore`` and
    ``STORE_WORDS``. Pure."""
    kept = set().union(*(words(t) for t in surviving))
    return set().union(*(words(t) for t in gone)) - kept - set(ignore) - STORE_WORDS


async def text_columns(session: AsyncSession, schema: str = "public") -> list[tuple[str, str]]:
    """(table, column) of every text-like column of every ordinary table in ``schema``
    (a partitioned table's rows are read through it, not through its partitions)."""
    rows = await session.execute(
        text(
            """
            SELECT c.relname, a.attname
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = :schema AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND a.attnum > 0
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
                f'/* multi-shard: residue-scan */ SELECT DISTINCT lower(m[1]) FROM "{schema}"."{table}" t, '
                f"regexp_matches(t.\"{column}\"::text, :pattern, 'gi') AS m"
            ),
            {"pattern": f"({pattern})"},
        )
        for (token,) in rows:
            found.setdefault(token, set()).add(f"{table}.{column}")
    return found


async def _scoped_columns(session: AsyncSession) -> list[tuple[str, str, str, str]]:
    """(table, column, type, scope) of every text-like column; scope is the column that
    names the conversation ('' for tables shared by all conversations)."""
    rows = await session.execute(
        text(
            """
            SELECT c.relname, a.attname, format_type(a.atttypid, NULL),
                   CASE WHEN c.relname = 'conversations' THEN 'id'
                        WHEN EXISTS (SELECT 1 FROM pg_attribute s WHERE s.attrelid = c.oid
                                     AND s.attname = 'conversation_id' AND NOT s.attisdropped) THEN 'conversation_id'
                        ELSE '' END
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND a.attnum > 0
              AND NOT a.attisdropped AND format_type(a.atttypid, NULL) = ANY(:types)
            ORDER BY c.relname, a.attnum
            """
        ),
        {"types": list(TEXT_TYPES)},
    )
    return [(t, c, kind, scope) for t, c, kind, scope in rows if (t, c) not in NOT_WORDS]


async def surviving_texts(session: AsyncSession, conversation_id: int) -> list[str]:
    """What the conversation still says: its messages, speakers' names and questions."""
    rows = await session.execute(
        text(
            """
            SELECT text FROM episodes WHERE conversation_id = :cid
            UNION ALL SELECT display_name FROM speakers WHERE conversation_id = :cid
            UNION ALL SELECT question FROM answer_traces WHERE conversation_id = :cid
            """
        ),
        {"cid": conversation_id},
    )
    return list(rows.scalars())


async def _lexemes(session: AsyncSession, candidates: Iterable[str]) -> dict[str, str]:
    """English stem -> word, for words the stemmer keeps (stop words have none)."""
    rows = await session.execute(
        text("SELECT l.lexeme, w FROM unnest(CAST(:words AS text[])) w, unnest(to_tsvector('english', w)) l"),
        {"words": sorted(candidates)},
    )
    return {lexeme: word for lexeme, word in rows}


@dataclass(frozen=True)
class WordResidue:
    """The words only the gone texts said (``checked``), and those of them found in the
    conversation's rows, mapped to the ``table.column`` places (empty: none survived)."""

    checked: frozenset[str]
    found: dict[str, set[str]]


async def word_residue(
    session: AsyncSession, conversation_id: int, gone_texts: Iterable[str], ignore: Iterable[str] = ()
) -> WordResidue:
    """Words only the gone texts said, looked for anywhere in the conversation's rows."""
    surviving = await surviving_texts(session, conversation_id)
    checked = unique_words(gone_texts, surviving, ignore)
    return WordResidue(frozenset(checked), await find_words(session, conversation_id, checked, surviving))


async def find_words(
    session: AsyncSession, conversation_id: int, candidates: set[str], surviving: Iterable[str]
) -> dict[str, set[str]]:
    """Where in the conversation's rows each of ``candidates`` appears; a tsvector is
    searched for the stems of those whose stem no ``surviving`` word shares."""
    if not candidates:
        return {}
    shared_stems = set(await _lexemes(session, words(" ".join(surviving))))
    stems = {lexeme: word for lexeme, word in (await _lexemes(session, candidates)).items() if lexeme not in shared_stems}
    found: dict[str, set[str]] = {}
    for table, column, kind, scope in await _scoped_columns(session):
        where = f't."{scope}" = :cid' if scope else "true"
        if kind == "tsvector":
            query = f'SELECT DISTINCT l.lexeme FROM "{table}" t, unnest(t."{column}") l WHERE {where} AND l.lexeme = ANY(:words)'
            wanted, back = sorted(stems), stems
        else:
            if kind in ("json", "jsonb"):  # string values only
                source = (
                    f"""SELECT lower(v #>> '{{}}') AS value FROM "{table}" t, """
                    f"""jsonb_path_query(t."{column}"::jsonb, 'strict $.**') v WHERE {where} AND jsonb_typeof(v) = 'string'"""
                )
            else:
                source = f'SELECT lower(t."{column}"::text) AS value FROM "{table}" t WHERE {where}'
            query = (
                f"SELECT DISTINCT w FROM ({source}) s, regexp_split_to_table(s.value, '[^[:alnum:]]+') w WHERE w = ANY(:words)"
            )
            wanted, back = sorted(candidates), {w: w for w in candidates}
        if not wanted:
            continue
        for (hit,) in await session.execute(text(query), {"cid": conversation_id, "words": wanted}):
            found.setdefault(back[hit], set()).add(f"{table}.{column}")
    return found
