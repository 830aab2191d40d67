"""Replay of supplied extraction outputs, for evaluation and tests.

A JSON Lines file, one object per episode, keyed by the platform message id::

    {"message_id": "D1:3",
     "entities": [{"name": "Caroline", "type": "person", "summary": "..."}],
     "relations": [{"subject": "Caroline", "predicate": "attends", "object": "support group",
                    "fact": "Caroline went to a support group", "valid_from": "2023-05-07",
                    "decision": "new"}]}

Every entity and relation of an object is stated by that episode alone. ``decision``
(new / duplicate / contradiction) is optional.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from memory.consolidation.extraction.base import (
    Chunk,
    ExtractedEntity,
    ExtractedRelation,
    Extraction,
)
from memory.errors import ValidationError
from memory.graph.reconcile import DECISIONS
from memory.validation import check_json, check_text, normalize_id, parse_time


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{where}.{key}", "is missing or not text")
    return check_text(value.strip(), f"{where}.{key}")


def _items(record: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    items = record.get(key) or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ValidationError(f"{where}.{key}", "must be a list of objects")
    return items


def _relation(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    decision = item.get("decision")
    if decision is not None and decision not in DECISIONS:
        raise ValidationError(f"{where}.decision", f"must be one of {', '.join(DECISIONS)}, got {decision!r}")
    valid_from = item.get("valid_from")
    return {
        "subject": _text(item, "subject", where),
        "predicate": _text(item, "predicate", where),
        "object": _text(item, "object", where),
        "fact": _text(item, "fact", where),
        "valid_from": parse_time(valid_from, f"{where}.valid_from") if valid_from else None,
        "decision": decision,
    }


def parse_record(record: Any, where: str) -> tuple[str, list[tuple[str, str, str]], list[dict[str, Any]]]:
    """Validate one JSON Lines object: (message id, entities, relations)."""
    if not isinstance(record, dict):
        raise ValidationError(where, "must be a JSON object")
    check_json(record, where)  # no NUL or lone surrogate anywhere in it
    message_id = normalize_id(record.get("message_id"), f"{where}.message_id")
    entities = [
        (_text(e, "name", f"{where}.entities[{i}]"), str(e.get("type") or "thing"), str(e.get("summary") or ""))
        for i, e in enumerate(_items(record, "entities", where))
    ]
    relations = [_relation(r, f"{where}.relations[{i}]") for i, r in enumerate(_items(record, "relations", where))]
    return message_id, entities, relations


class ReplayExtractor:
    """Answers each chunk with the supplied extractions of its new lines."""

    def __init__(self, records: Mapping[str, tuple[list[tuple[str, str, str]], list[dict[str, Any]]]]) -> None:
        self.records = dict(records)

    @classmethod
    def from_file(cls, path: Path) -> "ReplayExtractor":
        records: dict[str, tuple[list[tuple[str, str, str]], list[dict[str, Any]]]] = {}
        try:
            lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
        except UnicodeDecodeError as error:
            raise ValidationError(Path(path).name, f"not valid UTF-8 (at byte {error.start})") from None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{Path(path).name} line {number}"
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
                raise ValidationError(where, f"not JSON: {getattr(error, 'msg', error)}") from None
            message_id, entities, relations = parse_record(record, where)
            records[message_id] = (entities, relations)
        return cls(records)

    @classmethod
    def from_records(cls, records: list[dict[str, Any]]) -> "ReplayExtractor":
        parsed = [parse_record(record, f"record {i}") for i, record in enumerate(records)]
        return cls({message_id: (entities, relations) for message_id, entities, relations in parsed})

    async def extract(self, chunk: Chunk) -> Extraction:
        entities: list[ExtractedEntity] = []
        relations: list[ExtractedRelation] = []
        for line in chunk.new_lines:
            if line.message_id not in self.records:
                continue
            episode = frozenset({line.episode_id})
            found_entities, found_relations = self.records[line.message_id]
            entities += [ExtractedEntity(name, type_, summary, episode) for name, type_, summary in found_entities]
            relations += [ExtractedRelation(episode_ids=episode, **relation) for relation in found_relations]
        return Extraction(entities, relations)
