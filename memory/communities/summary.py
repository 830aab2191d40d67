"""What a community says about itself: its name and summary, from its members' current
facts only.

The inputs are read from the live graph (member names and types, the active relations
between members, with how many messages support each), so a summary can only hold what
surviving messages still support: relation texts are rendered from their surviving
witnesses and a connective anchor has no name left. The same inputs, hashed, fence the
write: a regeneration whose inputs changed while it summarised (a deletion meanwhile)
is not saved, and the community stays dirty for the next pass.

Offline the summary is deterministic: the best-supported member names, then the
best-supported relations (support, then id). With an LLM, one call per community, the
prompt within ``community_prompt_tokens``; a failed call falls back to the offline text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pydantic import BaseModel

from memory.errors import LLMError
from memory.models.llm import LLMClient
from memory.models.tokens import count_tokens, truncate_tokens
from memory.prompts import COMMUNITY_SYSTEM
from memory.store.ledger import Usage

NAMES_IN_LABEL = 3
NAMES_IN_SUMMARY = 8
SUMMARY_MAX_TOKENS = 300


@dataclass(frozen=True)
class Member:
    entity_id: int
    name: str
    type: str
    support: int
    is_anchor: bool


@dataclass(frozen=True)
class Fact:
    relation_id: int
    fact: str
    support: int


@dataclass(frozen=True)
class CommunityInputs:
    community_id: int
    members: tuple[Member, ...]  # by entity id
    facts: tuple[Fact, ...]  # by relation id

    @property
    def named(self) -> list[Member]:
        """Members that still have a name (not connective anchors), best-supported first."""
        return sorted((m for m in self.members if not m.is_anchor), key=lambda m: (-m.support, m.name, m.entity_id))

    @property
    def best_facts(self) -> list[Fact]:
        return sorted(self.facts, key=lambda f: (-f.support, f.relation_id))

    def fingerprint(self) -> str:
        return hashlib.sha256(repr((self.members, self.facts)).encode()).hexdigest()


@dataclass(frozen=True)
class Summary:
    label: str
    text: str
    usage: tuple[Usage, ...] = ()
    fallback: str | None = None  # why the LLM's summary was not used

    @property
    def document_text(self) -> str:
        return f"{self.label}: {self.text}"


def offline_summary(inputs: CommunityInputs, facts: int) -> Summary:
    names = [m.name for m in inputs.named]
    label = ", ".join(names[:NAMES_IN_LABEL])
    shown = names[:NAMES_IN_SUMMARY]
    text = ", ".join(shown) + (f" and {len(names) - len(shown)} more" if len(names) > len(shown) else "") + "."
    best = [f.fact.strip().rstrip(".") for f in inputs.best_facts[:facts] if f.fact.strip()]
    if best:
        text += " " + "; ".join(best) + "."
    return Summary(label, text)


def prompt(inputs: CommunityInputs, budget: int) -> str:
    """Members, then facts best-supported first, cut at ``budget`` tokens."""
    lines = ["Members:"] + [f"- {m.name} ({m.type})" for m in inputs.named] + ["Facts:"]
    lines += [f"- {f.fact}" for f in inputs.best_facts]
    kept: list[str] = []
    used = 0
    for line in lines:
        used += count_tokens(line) + 1
        if used > budget:
            break
        kept.append(line)
    return "\n".join(kept)


class _Named(BaseModel):
    name: str
    summary: str


async def llm_summary(llm: LLMClient, inputs: CommunityInputs, budget: int, facts: int) -> Summary:
    """One LLM call; on failure (or an empty reply) the offline summary, with the cost."""
    try:
        result = await llm.complete_json(
            system=COMMUNITY_SYSTEM,
            user=prompt(inputs, budget),
            schema=_Named,
            phase="community",
            operation="summarize_community",
            max_tokens=SUMMARY_MAX_TOKENS,
        )
    except LLMError as error:
        fallback = offline_summary(inputs, facts)
        spent = (error.usage,) if error.usage else ()
        return Summary(fallback.label, fallback.text, spent, fallback=str(error))
    label, text = result.value.name.strip(), result.value.summary.strip()
    if not label or not text:
        fallback = offline_summary(inputs, facts)
        return Summary(fallback.label, fallback.text, (result.usage,), fallback="empty reply")
    return Summary(truncate_tokens(label, 20), truncate_tokens(text, SUMMARY_MAX_TOKENS), (result.usage,))
