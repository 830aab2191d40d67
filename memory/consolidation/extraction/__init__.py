"""Extractors behind one interface: LLM, offline (spaCy + rules) and replay."""

from memory.consolidation.extraction.base import (
    Chunk,
    ChunkLine,
    ExtractedEntity,
    ExtractedRelation,
    Extraction,
    Extractor,
)
from memory.consolidation.extraction.llm import LLMExtractor
from memory.consolidation.extraction.offline import OfflineExtractor
from memory.consolidation.extraction.replay import ReplayExtractor

__all__ = [
    "Chunk",
    "ChunkLine",
    "ExtractedEntity",
    "ExtractedRelation",
    "Extraction",
    "Extractor",
    "LLMExtractor",
    "OfflineExtractor",
    "ReplayExtractor",
]
