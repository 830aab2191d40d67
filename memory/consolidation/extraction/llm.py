"""The LLM extractor: one call per chunk returns the entities, the relations (each
citing the numbered lines that state it) *and* the updated running summary, so a chunk
costs one call rather than two (summary + extraction). spaCy's named-entity mentions go
into the prompt as hints."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from memory.consolidation.extraction.base import (
    Chunk,
    ChunkLine,
    ExtractedEntity,
    ExtractedRelation,
    Extraction,
)
from memory.consolidation.extraction.nlp import mentions, parse
from memory.consolidation.rolling_context import render_context
from memory.errors import ValidationError
from memory.models.llm import LLMClient
from memory.prompts import EXTRACT_SYSTEM
from memory.validation import parse_time


class EntityOut(BaseModel):
    name: str
    type: str = "thing"
    summary: str = ""
    lines: list[int] = Field(default_factory=list)


class RelationOut(BaseModel):
    subject: str
    predicate: str
    object: str
    fact: str
    valid_from: str | None = None
    lines: list[int] = Field(default_factory=list)
    decision: Literal["new", "duplicate", "contradiction"] | None = None


class ExtractionOut(BaseModel):
    summary: str = ""
    entities: list[EntityOut] = Field(default_factory=list)
    relations: list[RelationOut] = Field(default_factory=list)


def extraction_prompt(chunk: Chunk, hints: list[tuple[str, str]]) -> str:
    first_new = chunk.new_lines[0].number if chunk.new_lines else 0
    parts = [
        f"Running summary so far:\n{chunk.summary or '(none yet)'}",
        f"Known context (entities and facts):\n{render_context(chunk.rolling_context) or '(none yet)'}",
        "Names spotted in the new messages: " + (", ".join(f"{name} ({type_})" for name, type_ in hints) or "(none)"),
        f"Messages (lines before L{first_new} were processed already and are context only; extract from L{first_new} on):",
        "\n".join(line.render() for line in chunk.lines),
    ]
    return "\n\n".join(parts)


def _cited(numbers: list[int], lines: dict[int, ChunkLine]) -> frozenset[int]:
    return frozenset(lines[n].episode_id for n in numbers if n in lines)


def _valid_from(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parse_time(value, "valid_from")
    except ValidationError:
        return None  # a date the model wrote loosely is not worth failing the chunk for


def to_extraction(reply: ExtractionOut, chunk: Chunk) -> Extraction:
    lines = chunk.by_number()
    entities = [
        ExtractedEntity(e.name.strip(), e.type.strip() or "thing", e.summary.strip(), _cited(e.lines, lines))
        for e in reply.entities
        if e.name.strip()
    ]
    relations = [
        ExtractedRelation(
            r.subject.strip(),
            r.predicate.strip(),
            r.object.strip(),
            r.fact.strip(),
            _cited(r.lines, lines),
            _valid_from(r.valid_from),
            r.decision,
        )
        for r in reply.relations
        if r.subject.strip() and r.object.strip() and r.predicate.strip() and r.fact.strip()
    ]
    return Extraction(entities, relations, reply.summary.strip())


class LLMExtractor:
    def __init__(self, llm: LLMClient, max_tokens: int | None = None) -> None:
        self.llm = llm
        self.max_tokens = max_tokens

    async def extract(self, chunk: Chunk) -> Extraction:
        hints = mentions(parse(line.text for line in chunk.new_lines if line.role != "bot"))
        result = await self.llm.complete_json(
            system=EXTRACT_SYSTEM,
            user=extraction_prompt(chunk, hints),
            schema=ExtractionOut,
            phase="ingestion",
            operation="extract",
            max_tokens=self.max_tokens,
        )
        extraction = to_extraction(result.value, chunk)
        return Extraction(extraction.entities, extraction.relations, extraction.summary, [result.usage])
