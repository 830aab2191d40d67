"""Hand-written rewordings of LoCoMo questions (lab/data/locomo_paraphrases.json), which
``stashbird bench answers`` asks beside the questions as written. Only the benchmarks
read them; the LoCoMo reader they are checked against is the product's (bot/locomo.py,
which ``stashbird ingest --locomo`` uses)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.files import read_json
from bot.locomo import Conversation
from memory import ValidationError


@dataclass(frozen=True)
class Rewording:
    """A hand-written rewording of one LoCoMo question: the same meaning in other content words."""

    conversation: str
    index: int  # the question's position in ``Conversation.questions``
    original: str
    reworded: str


PARAPHRASES = Path(__file__).resolve().parents[1] / "data" / "locomo_paraphrases.json"


def load_rewordings(conversations: dict[str, Conversation], path: Path = PARAPHRASES) -> dict[tuple[str, int], Rewording]:
    """The rewordings of the loaded conversations' questions, keyed by (conversation,
    question index). One whose original no longer matches the question at its index is
    a ``ValidationError``: the data and the corpus disagree, and figures would compare
    different questions."""
    data = read_json(path)
    found: dict[tuple[str, int], Rewording] = {}
    for entry in data.get("questions", []) if isinstance(data, dict) else []:
        rewording = Rewording(str(entry["conversation"]), int(entry["index"]), str(entry["original"]), str(entry["reworded"]))
        conversation = conversations.get(rewording.conversation)
        if conversation is None:
            continue
        questions = conversation.questions
        if not 0 <= rewording.index < len(questions) or questions[rewording.index].question != rewording.original:
            raise ValidationError(
                "paraphrases", f"{path}: question {rewording.index} of {rewording.conversation} is not {rewording.original!a}"
            )
        found[(rewording.conversation, rewording.index)] = rewording
    return found
