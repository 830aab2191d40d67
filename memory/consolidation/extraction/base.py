"""What every extractor takes and gives: a chunk of numbered lines in, entities and
relations out, each citing the episodes that state it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, Sequence

from memory.store.ledger import Usage


@dataclass(frozen=True)
class ChunkLine:
    """One episode as the extractor sees it; ``number`` is its line number in the prompt."""

    number: int
    episode_id: int
    message_id: str
    speaker: str
    role: str
    text: str
    time: datetime

    def render(self) -> str:
        text = " ".join(self.text.split())  # one line per episode, so line numbers hold
        return f"L{self.number} [{self.time:%Y-%m-%d %H:%M}] {self.speaker}: {text}"


@dataclass(frozen=True)
class Chunk:
    """Lines to consolidate (``is_new``) after overlap lines that were already extracted,
    with the running summary and the rolling entity-centred context."""

    conversation_id: int
    lines: Sequence[ChunkLine]
    new_from: int  # index in ``lines`` of the first new line
    summary: str = ""
    rolling_context: Sequence[dict[str, Any]] = ()

    @property
    def new_lines(self) -> Sequence[ChunkLine]:
        return self.lines[self.new_from :]

    def by_number(self) -> dict[int, ChunkLine]:
        return {line.number: line for line in self.lines}


@dataclass(frozen=True)
class ExtractedEntity:
    name: str
    type: str
    summary: str
    episode_ids: frozenset[int]


@dataclass(frozen=True)
class ExtractedRelation:
    subject: str
    predicate: str
    object: str
    fact: str
    episode_ids: frozenset[int]
    valid_from: datetime | None = None
    decision: str | None = None  # new | duplicate | contradiction, when the extractor knows


@dataclass(frozen=True)
class Extraction:
    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    summary: str | None = None  # the updated running summary, when the extractor wrote one
    usage: list[Usage] = field(default_factory=list)  # LLM calls made, for the ledger


class Extractor(Protocol):
    async def extract(self, chunk: Chunk) -> Extraction: ...
