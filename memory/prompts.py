"""Every system prompt the memory core sends to an LLM, in one place.

A prompt is part of a step's contract with the model as much as its schema is: kept
together they can be read side by side (the same words for the same things: "memory
items", "group conversation", "superseded"), changed in one review, and counted. The
steps that send them (extraction, entity resolution, context compression, the running
summary, decomposition, rerank, the grounded answer, community summaries) import them
from here; the JSON schema each reply must match is added by ``memory.models.llm``.
"""

from __future__ import annotations

# Consolidation -----------------------------------------------------------------------

SUMMARY_WORDS = 300  # the running summary's length the extraction prompt asks for

EXTRACT_SYSTEM = f"""You maintain the long-term memory of a group conversation.
From the numbered messages, extract:
- entities: people, places, organisations, things, events worth remembering, with a type
  and a one-sentence summary of what the messages say about them;
- relations: facts "subject predicate object" between two entities, with a short fact
  sentence, a snake_case predicate (lives_in, works_at, likes, ...), valid_from (ISO date)
  when the messages say when it became true, and decision: "duplicate" if an entry of the
  known context already states it, "contradiction" if it replaces a fact stated there
  (a move, a new job, a correction), else "new".
Cite in "lines" the line numbers of the messages that state each entity or relation.
Messages from bots are context only: never cite them. First-person statements are about
their speaker ("I moved to Boston": subject is the speaker).
Also rewrite the running summary of the whole conversation so far, at most {SUMMARY_WORDS} words."""

SUMMARY_SYSTEM = (
    "Summarise this group conversation for someone who will continue it: who the people "
    "are, what they said about themselves and each other, plans, decisions and changes. "
    "At most 300 words. Use only what the messages say."
)

RESOLVE_SYSTEM = (
    "Decide which mentioned names refer to an already known entity of the same group "
    "conversation. For each mention give the id of the known entity it is, or null when "
    "it is a different one. Only answer with ids from that mention's candidates."
)

# ``{budget}``: the rolling context's token budget.
COMPRESS_SYSTEM = (
    "Shorten each entry of this entity context so that all of them together fit in {budget} "
    "tokens. Keep names, facts and dates; drop commentary. Keep every entity_id."
)

# Communities -------------------------------------------------------------------------

COMMUNITY_SYSTEM = (
    "These entities form one cluster of a group conversation's memory. Give the cluster a "
    "short name (at most 6 words) and a summary of at most 80 words of what connects them. "
    "Use only the facts listed; never add anything else."
)

# Retrieval and answering -------------------------------------------------------------

# ``{limit}``: how many sub-queries at most.
DECOMPOSE_SYSTEM = (
    "You split questions about a group conversation into focused search queries. "
    "A question about several people or things, about time, or with several parts gets "
    "up to {limit} short queries, each about one person, thing or event, with relative "
    "times rewritten as explicit dates using the question date. A question that is "
    "already focused gets an empty list."
)

RERANK_SYSTEM = (
    "You judge which memory items help answer a question about a group conversation. "
    "Score every item from 0 (no help) to 10 (answers it directly). Items marked "
    "superseded describe what used to be true."
)

ANSWER_SYSTEM = (
    "You answer questions about a group conversation using only the memory items given. "
    "Messages are listed in time order under their date, each with a label like [E3] or "
    "[E3.1] and who said it; facts carry the date of the messages they come from. Use the question date to "
    "turn relative times into dates. Cite the labels of the items your answer rests on, the one that "
    "answers first. Items marked superseded are no longer true, and bot messages are not evidence. "
    "If the items do not contain the answer, or say it of a different person than the question names, "
    "set in_memory to false and say plainly that memory does not hold it; never guess. "
    "Answer in one short line."
)
