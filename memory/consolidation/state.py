"""What a consolidation run carries: its state from the saved checkpoint and between
chunks, the work cut into chunks, and a chunk as prepared outside the write transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.consolidation.checkpoints import CheckpointUpdate
from memory.consolidation.chunking import Cut, cut_chunks, within
from memory.consolidation.extraction import Chunk, ExtractedRelation
from memory.consolidation.mentions import ChunkEpisode, Mention
from memory.consolidation.reading import line_size, read_work
from memory.consolidation.rolling_context import fit_context, one_per_entity, without_episodes
from memory.consolidation.summary import SummaryLine, summary_lines
from memory.core import Memory
from memory.store.checkpoints import ensure_checkpoint
from memory.store.rolling_context import in_order, load_context
from memory.store.schema import Checkpoint


@dataclass
class RunState:
    """What a run carries from one saved chunk to the next: the checkpoint as this run
    last saved it (``last``: its watermark, to detect another run), and offline, the
    summary lines the next offline summary extends."""

    last: int
    summary: str
    summary_ids: list[int]
    rolling: list[dict[str, Any]]
    summary_lines: list[SummaryLine]

    def saved(self, update: CheckpointUpdate, rolling: list[dict[str, Any]], chunk: Chunk, offline: bool) -> None:
        self.last, self.summary, self.summary_ids = update.last_episode_id, update.summary, update.summary_episode_ids
        self.rolling = rolling
        if offline:
            self.summary_lines += [SummaryLine(line.episode_id, f"{line.speaker}: {line.text}") for line in chunk.new_lines]


@dataclass
class Prepared:
    """A chunk resolved and embedded, with its summary and rolling context: everything
    decided outside the write transaction (the LLM calls included)."""

    mentions: dict[str, Mention]
    relations: list[ExtractedRelation]
    name_vectors: dict[str, list[float]]
    fact_vectors: list[list[float]]
    doc_vectors: dict[str, list[float]]
    summary: str
    summary_ids: list[int]
    rolling: list[dict[str, Any]]

    @property
    def carried(self) -> set[int]:
        """The episodes the carried rolling context and summary rest on."""
        return {e for item in self.rolling for e in item["episode_ids"]} | set(self.summary_ids)

    def without(self, gone: set[int]) -> None:
        """Episodes deleted or edited since the chunk was read support nothing."""
        for mention in self.mentions.values():
            mention.episodes -= gone
            if mention.summary_episodes & gone:
                mention.summary, mention.summary_episodes = "", set()

    def final_rolling(self, vanished: dict[int, int | None], gone: set[int], budget: int) -> list[dict[str, Any]]:
        """The rolling context to save: without what rests on gone episodes, placeholder
        ids replaced by the written entities' (dropped when none was written), within budget."""
        rolling = without_episodes(self.rolling, gone)
        placeholders = {m.context_key: m.entity_id for m in self.mentions.values()} | vanished
        rolling = [{**item, "entity_id": placeholders.get(item["entity_id"], item["entity_id"])} for item in rolling]
        rolling = [item for item in rolling if item["entity_id"] is not None and item["entity_id"] > 0]
        return fit_context(one_per_entity(rolling), budget)


async def start(memory: Memory, conversation_id: int, max_tokens: int | None = None) -> tuple[RunState, list[Cut[ChunkEpisode]]]:
    """The run state from the saved checkpoint, and the work (the oldest episodes within
    ``max_tokens``, else all) cut into chunks."""
    params = memory.params
    async with memory._sessions.begin() as session:
        await ensure_checkpoint(session, conversation_id)
    async with memory._sessions() as session:
        checkpoint = await session.get(Checkpoint, conversation_id)
        assert checkpoint is not None
        episodes, lead = await read_work(session, conversation_id, checkpoint, int(params.chunk_tokens * params.chunk_overlap))
        summary_ids = list(checkpoint.summary_episode_ids or [])
        lines = await summary_lines(session, conversation_id, summary_ids) if memory.llm is None else []
        state = RunState(
            checkpoint.last_episode_id,
            checkpoint.summary,
            summary_ids,
            in_order(await load_context(session, conversation_id)),
            lines,
        )
    sizes = [line_size(e) for e in episodes]
    taken = within(sizes, max_tokens)
    cuts = cut_chunks(
        episodes[:taken],
        sizes[:taken],
        params.chunk_tokens,
        params.chunk_overlap,
        lead,
        [line_size(e) for e in lead],
    )
    return state, cuts
