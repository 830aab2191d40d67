"""Hostile JSON Lines: every kind of bad line the input-hardening issue found, as raw
bytes, mixed among good lines. Used by the tests, and runnable to write such a file:
``python tests/hostile.py OUT.jsonl [GOOD] [HOSTILE]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def good_line(number: int) -> dict[str, object]:
    """A good message; a few use author_id/author_name, carry unknown fields, or an id
    with surrounding blanks (stored stripped)."""
    fields: dict[str, object] = {"id": f"g{number}", "author": "ann", "text": f"note {number}", "ts": 1_700_000_000 + number}
    if number % 7 == 1:
        fields = {**fields, "author_id": "U1", "author_name": "Ann", "extra": {"nested": [1, 2]}, "reply_to": "g0"}
        del fields["author"]
    if number % 250 == 3:
        fields["id"] = f"  g{number}\t"
    return fields


def _line(**changes: object) -> bytes:
    fields: dict[str, object] = {"id": "h", "author": "bob", "text": "hostile", "ts": "2026-01-01T10:00:00Z", **changes}
    return json.dumps(fields).encode()


# (kind, raw line): each is refused, naming what is wrong. "h" ids are made unique per line.
HOSTILE: list[tuple[str, bytes]] = [
    ("nul in text", _line(text="a\u0000b")),
    ("nul in author", _line(author="b\u0000b")),
    ("nul in id", _line(id="h\u0000")),
    ("lone surrogate in text", b'{"id": "h", "author": "bob", "text": "a\\ud800b", "ts": 1700000000}'),
    ("lone surrogate in author", b'{"id": "h", "author": "\\udc80", "text": "x", "ts": 1700000000}'),
    ("1 MB text", _line(text="word " * 200_000)),
    ("10,000-character id", _line(id="h" + "x" * 10_000)),
    ("time Postgres cannot hold", _line(ts="0001-01-01T00:00:00+01:00")),
    ("epoch milliseconds", _line(ts=1_700_000_000_000)),
    ("1e20", b'{"id": "h", "author": "bob", "text": "x", "ts": 1e20}'),
    ("Infinity", b'{"id": "h", "author": "bob", "text": "x", "ts": Infinity}'),
    ("'inf'", _line(ts="inf")),
    ("NaN", b'{"id": "h", "author": "bob", "text": "x", "ts": NaN}'),
    ("invalid UTF-8", b'{"id": "h", "author": "bob", "text": "caf\xe9", "ts": 1700000000}'),
    ("deep nesting", b'{"id": "h", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("id: true", _line(id=True)),
    ("reply_to object", _line(reply_to={"id": "g1"})),
    ("same id, different text", json.dumps({**good_line(0), "text": "a different text"}).encode()),
    ("invalid JSON", b'{"id": "h", "author": '),
    ("not an object", b'["h", "bob", "x"]'),
    ("control character in id", _line(id="h\u0007")),
    ("4,400-digit number", b'{"id": "h", "author": "bob", "text": "x", "ts": ' + b"9" * 4400 + b"}"),
    ("ts: true", _line(ts=True)),
    ("author is a list", _line(author=["bob"])),
    ("no text", _line(text="   ")),
]


def mixed_file(good: int = 1000, hostile: int = 100) -> tuple[bytes, list[int], list[str]]:
    """A file of ``good`` good lines and ``hostile`` hostile ones spread among them
    (cycling through every kind), starting with a byte-order mark; returns its bytes,
    the hostile lines' numbers and their kinds."""
    lines: list[bytes] = []
    numbers: list[int] = []
    kinds: list[str] = []
    every = max(1, good // max(1, hostile))
    for index in range(good):
        lines.append(json.dumps(good_line(index)).encode())
        if index % every == every - 1 and len(numbers) < hostile:
            kind, raw = HOSTILE[len(numbers) % len(HOSTILE)]
            lines.append(raw.replace(b'"id": "h', b'"id": "h%d' % len(numbers), 1))
            numbers.append(len(lines))
            kinds.append(kind)
    return b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n", numbers, kinds


NEWLINE = b"\n"

if __name__ == "__main__":
    data, numbers, _ = mixed_file(*(int(a) for a in sys.argv[2:4]))
    Path(sys.argv[1]).write_bytes(data)
    print(f"wrote {sys.argv[1]}: {len(numbers)} hostile lines among {data.count(NEWLINE) - len(numbers)} good ones")
