"""LoCoMo's own observations as supplied extractions: how much of retrieval's gap is
extraction (issue 47, item 3).

Each LoCoMo session comes with ``session_N_observation``: per speaker, facts an LLM wrote
about them from that session, each with the turns it rests on ("Caroline attended an
LGBTQ support group recently ...", ``D1:3``). Replayed as the graph (``ReplayExtractor``)
in place of what the offline extractor finds, they show what retrieval gains from the
extractions an LLM would make, with the offline search unchanged.

The rule, per observation of a speaker (pure but for spaCy's parse):

- it is one relation, its fact the observation's text, stated by each turn it cites
  (ids read as ``bot.locomo.evidence_ids`` reads evidence; an id that names no turn of
  the conversation is dropped, an observation left with none is skipped);
- its subject is the speaker (a person); its predicate and object are those of the first
  fact the offline extractor's rules find in the observation with the speaker as subject
  ("Melanie ran a charity race ...": ``run``, ``charity race``), else ``noted`` and the
  speaker's profile (an entity named "<speaker> (profile)"), so a fact without an object
  the rules can name still hangs on its speaker;
- its decision is ``new``: two observations of a speaker are never merged because they
  share a pair, only when their texts are the same (reconciliation's rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bot import locomo
from lab.probes import normalize_name, offline_findings

PROFILE = "{speaker} (profile)"


def observations(data: Mapping[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(speaker, text, turn ids) of every observation in a LoCoMo file's JSON, in session
    order; malformed entries are left out."""
    found: list[tuple[str, str, tuple[str, ...]]] = []
    sessions = sorted(int(key.split("_")[1]) for key in data if key.startswith("session_") and key.endswith("_observation"))
    for number in sessions:
        by_speaker = data[f"session_{number}_observation"]
        for speaker, items in by_speaker.items() if isinstance(by_speaker, dict) else ():
            for item in items if isinstance(items, list) else ():
                if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and item[0].strip():
                    cited = item[1] if isinstance(item[1], list) else [item[1]]
                    found.append((str(speaker), item[0].strip(), locomo.evidence_ids(cited)))
    return found


def _pair(speaker: str, found: Any) -> tuple[str, str, str]:
    """(predicate, object, object type) of an observation about ``speaker`` (the offline
    extractor's ``found`` in it)."""
    for subject, predicate, obj, _ in found.relations:
        if normalize_name(subject) == normalize_name(speaker):
            return predicate, obj, "thing"
    return "noted", PROFILE.format(speaker=speaker), "topic"


def replay_records(items: Sequence[tuple[str, str, tuple[str, ...]]], turns: Iterable[str]) -> list[dict[str, Any]]:
    """Replay records (one per turn, ``ReplayExtractor.from_records``) of ``items``, the
    (speaker, text, turn ids) of ``observations``, over a conversation's ``turns`` ids."""
    known = set(turns)
    records: dict[str, dict[str, Any]] = {}
    for (speaker, text, cited), found in zip(items, offline_findings([(s, t) for s, t, _ in items]), strict=True):
        predicate, obj, kind = _pair(speaker, found)
        relation = {"subject": speaker, "predicate": predicate, "object": obj, "fact": text, "decision": "new"}
        for turn in (t for t in cited if t in known):
            record = records.setdefault(turn, {"message_id": turn, "entities": [], "relations": []})
            for name, type_ in ((speaker, "person"), (obj, kind)):
                if {"name": name, "type": type_} not in record["entities"]:
                    record["entities"].append({"name": name, "type": type_})
            record["relations"].append(relation)
    return list(records.values())
