"""Reading the files a user hands us: UTF-8 (a byte-order mark is skipped), ``-`` for
standard input, and one clear error for a file that cannot be read at all."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from memory import ValidationError

BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


@contextmanager
def open_input(path: Path) -> Iterator[BinaryIO]:
    """The file's bytes, or standard input's for ``-``."""
    if str(path) == "-":
        yield sys.stdin.buffer
        return
    if path.is_dir():
        raise ValidationError("file", f"{path} is a folder, not a file")
    try:
        handle = path.open("rb")
    except ValueError:  # a NUL or a lone surrogate (UnicodeEncodeError): no file has such a name
        raise ValidationError("file", f"{ascii(str(path))} cannot be a file name (NUL or invalid Unicode)") from None
    with handle:
        yield handle


def decode_line(raw: bytes, first: bool) -> str:
    """One line as text; the first may start with a byte-order mark."""
    if first and raw.startswith(UTF16_BOMS):
        raise ValidationError("file", "is UTF-16; save it as UTF-8")
    try:
        return (raw[len(BOM) :] if first and raw.startswith(BOM) else raw).rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValidationError("line", f"not valid UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start})") from None


def parse_json(text: str) -> Any:
    """JSON with its failures as ``ValidationError``: bad syntax, nesting deeper than
    Python's parser follows, numbers too long to convert."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValidationError("line", "JSON nested too deeply") from None
    except json.JSONDecodeError as error:
        raise ValidationError("line", f"invalid JSON: {error.msg} at column {error.colno}") from None
    except ValueError:  # Python converts integers of at most 4,300 digits
        raise ValidationError("line", "invalid JSON: a number too long to convert") from None


def read_json(path: Path) -> Any:
    """A whole JSON document (UTF-8, optional byte-order mark)."""
    with open_input(path) as handle:
        data = handle.read()
    try:
        return parse_json(decode_line(data, first=True))
    except ValidationError as error:
        raise ValidationError("file", f"{path}: {error.message}") from None
