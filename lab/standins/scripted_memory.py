"""Scripted LLM handlers for consolidation, for tests and the offline workload benchmark.

They answer the real prompts deterministically: ``extract`` with what the offline
extractor (spaCy + rules) finds in the prompt's new lines, citing their line numbers;
``resolve_entity`` by name similarity; ``compress_context`` by keeping each entry's first
words; ``summary`` with the names discussed. So the replies are realistic in shape and
size, and the prompts are the real ones.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lab.probes import name_ratio, offline_findings
from lab.standins.scripted_llm import ChatRequest, Handler

_LINE = re.compile(r"^L(\d+) \[[^\]]*\] ([^:]+): (.*)$", re.MULTILINE)
_FIRST_NEW = re.compile(r"extract from L(\d+) on")
_MENTION = re.compile(r"^M(\d+): (\{.*\})$", re.MULTILINE)
_ENTRY = re.compile(r"^\[E(-?\d+)\] (.*)$", re.MULTILINE)


def extract(request: ChatRequest) -> dict[str, Any]:
    prompt = request.user
    first = _FIRST_NEW.search(prompt)
    start = int(first.group(1)) if first else 1
    lines = [(int(n), speaker, text) for n, speaker, text in _LINE.findall(prompt) if int(n) >= start]
    entities: dict[str, dict[str, Any]] = {}
    relations = []
    for (number, _, _), found in zip(lines, offline_findings([(speaker, text) for _, speaker, text in lines]), strict=False):
        for name, type_ in found.entities:
            entities.setdefault(name.casefold(), {"name": name, "type": type_, "summary": "", "lines": []})["lines"].append(
                number
            )
        relations += [
            {"subject": s, "predicate": p, "object": o, "fact": f, "lines": [number], "decision": None}
            for s, p, o, f in found.relations
        ]
    names = sorted(entities.values(), key=lambda e: -len(e["lines"]))[:20]
    summary = "Discussed: " + ", ".join(e["name"] for e in names) if names else ""
    return {"summary": summary, "entities": list(entities.values()), "relations": relations}


def resolve_entity(request: ChatRequest) -> dict[str, Any]:
    matches = []
    for index, payload in _MENTION.findall(request.user):
        mention = json.loads(payload)
        best = max(mention["candidates"], key=lambda c: name_ratio(mention["name"], c["name"]), default=None)
        if best is not None and name_ratio(mention["name"], best["name"]) >= 0.8:
            matches.append({"mention": int(index), "entity_id": best["id"]})
        else:
            matches.append({"mention": int(index), "entity_id": None})
    return {"matches": matches}


def compress_context(request: ChatRequest) -> dict[str, Any]:
    return {
        "entries": [
            {"entity_id": int(entity_id), "text": " ".join(text.split()[:8])} for entity_id, text in _ENTRY.findall(request.user)
        ]
    }


def summary(request: ChatRequest) -> str:
    names = sorted({m.group(2) for m in re.finditer(r"^(L\d+ \[[^\]]*\] )?([^:\n]+):", request.user, re.MULTILINE)})
    return "A conversation between " + ", ".join(names[:10]) + "."


HANDLERS: dict[str, Handler] = {
    "extract": extract,
    "resolve_entity": resolve_entity,
    "compress_context": compress_context,
    "summary": summary,
}
