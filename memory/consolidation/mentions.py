"""From a chunk's extraction to mentions: the entities the chunk names, one per
normalised name, with the episodes that support them and the name form each used, and
the rolling-context entries they update. Pure: resolution fills in ``decision`` and
``entity_id`` (memory.consolidation.run), the writes follow (memory.consolidation.saving).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.consolidation.extraction import ExtractedEntity, ExtractedRelation, Extraction
from memory.consolidation.rolling_context import entry
from memory.graph import writes as graph
from memory.graph.reconcile import EntityCandidate, normalize_name
from memory.graph.wording import EntityWitness

FACTS_PER_CONTEXT_ENTRY = 3


@dataclass(frozen=True)
class ChunkEpisode:
    id: int
    message_id: str
    speaker: str
    role: str
    text: str
    time: datetime
    edited_at: datetime | None


@dataclass
class Mention:
    """An entity as this chunk knows it, before and after resolution."""

    name: str
    type: str
    summary: str
    episodes: set[int]
    summary_episodes: set[int] = field(default_factory=set)
    decision: str = "new"  # new | merge
    entity_id: int | None = None  # merge target, then the written id
    candidates: tuple[EntityCandidate, ...] = ()
    context_key: int = 0  # placeholder id in the rolling context until written
    forms: dict[int, str] = field(default_factory=dict)  # episode -> the name form it used

    def witnesses(self) -> list[EntityWitness]:
        """Each episode's own mention (memory.graph.wording): the name form it used,
        not the one resolution chose, and the summary if it was drawn from it."""
        return [
            EntityWitness(
                e,
                self.forms.get(e, self.name),
                self.type,
                *((self.summary, frozenset(self.summary_episodes)) if e in self.summary_episodes else ("", frozenset())),
            )
            for e in sorted(self.episodes)
        ]


def evidence_of(extraction: Extraction, allowed: set[int]) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """Keep only evidence from user/admin episodes of the chunk; drop what has none left."""
    entities = [
        dataclasses.replace(e, episode_ids=e.episode_ids & allowed) for e in extraction.entities if e.episode_ids & allowed
    ]
    relations = [
        dataclasses.replace(r, episode_ids=r.episode_ids & allowed)
        for r in extraction.relations
        if r.episode_ids & allowed
        and normalize_name(r.subject)
        and normalize_name(r.object)
        and normalize_name(r.subject) != normalize_name(r.object)
    ]
    return entities, relations


def mentions_of(entities: Sequence[ExtractedEntity], relations: Sequence[ExtractedRelation]) -> dict[str, Mention]:
    """One mention per normalised name within the chunk. A relation's episodes mention
    both its ends."""
    mentions: dict[str, Mention] = {}
    for e in entities:
        key = normalize_name(e.name)
        if not key:
            continue
        mention = mentions.setdefault(key, Mention(e.name, e.type, "", set()))
        mention.episodes |= e.episode_ids
        mention.forms.update({episode: e.name for episode in e.episode_ids if episode not in mention.forms})
        if e.summary:
            mention.summary, mention.summary_episodes = e.summary, set(e.episode_ids)
    for r in relations:
        for name in (r.subject, r.object):
            mention = mentions.setdefault(normalize_name(name), Mention(name, "thing", "", set()))
            mention.episodes |= r.episode_ids
            mention.forms.update({episode: name for episode in r.episode_ids if episode not in mention.forms})
    for index, mention in enumerate(mentions.values(), start=1):
        mention.context_key = -index
    return mentions


def entity_text(mention: Mention, name: str, type_: str) -> str:
    return graph.entity_document_text(name, type_, mention.summary)


def context_updates(
    mentions: dict[str, Mention], relations: Sequence[ExtractedRelation], names: dict[str, tuple[str, str]]
) -> list[dict[str, Any]]:
    """Rolling-context entries for the entities this chunk touched, with their newest facts."""
    facts: dict[str, list[ExtractedRelation]] = {}
    for r in relations:
        facts.setdefault(normalize_name(r.subject), []).append(r)
    updates = []
    for key, mention in mentions.items():
        name, type_ = names[key]
        own = facts.get(key, [])[-FACTS_PER_CONTEXT_ENTRY:]
        text = entity_text(mention, name, type_)
        if own:
            text += " Facts: " + "; ".join(r.fact for r in own)
        episodes = set(mention.episodes).union(*(r.episode_ids for r in own)) if own else set(mention.episodes)
        key_id = mention.entity_id if mention.decision == "merge" and mention.entity_id is not None else mention.context_key
        updates.append(entry(key_id, name, text, episodes))
    return updates
