"""Extractors behind one interface: LLM, offline (spaCy + rules) and replay."""

from memory.extraction.base import Chunk, ChunkLine, ExtractedEntity, ExtractedRelation, Extraction, Extractor
from memory.extraction.llm import LLMExtractor
from memory.extraction.offline import OfflineExtractor
from memory.extraction.replay import ReplayExtractor

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
