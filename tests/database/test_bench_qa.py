"""``stashbird bench qa`` end to end through the scripted LLM server on a tiny
LoCoMo-shaped file: it must run, grade with the judge and count correctly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.cli import build_parser
from bot.settings import DatabaseSettings, ModelSettings, Settings
from memory.errors import ConfigurationError

CONVERSATION = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog yesterday, his name is Rex!"},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Congrats! Do you still go hiking on weekends?"},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "Yes, hiking is my favourite thing."},
    ],
    "session_2_date_time": "10:00 am on 20 June, 2023",
    "session_2": [
        {"speaker": "Bo", "dia_id": "D2:1", "text": "I went hiking in the Alps last week, loved it."},
        {"speaker": "Ann", "dia_id": "D2:2", "text": "Rex came on my last hike too."},
    ],
}
QUESTIONS = [
    {"question": "What is the name of Ann's dog?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
    {"question": "When did Ann adopt Rex?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
    {"question": "What do Ann and Bo both like?", "answer": "hiking", "evidence": ["D1:3", "D2:1"], "category": 1},
    {"question": "Which city would Bo likely visit next?", "answer": "Paris", "evidence": ["D2:1"], "category": 3},
    {"question": "What is Bo's cat called?", "adversarial_answer": "Tom", "evidence": [], "category": 5},
]
# What the scripted "LLM" answers: right for two questions, wrong for two, and it
# declines the adversarial one.
REPLIES = {
    "What is the name of Ann's dog?": {"answer": "Rex", "citations": ["E1"], "in_memory": True},
    "When did Ann adopt Rex?": {"answer": "In June 2023", "citations": ["E1"], "in_memory": True},
    "What do Ann and Bo both like?": {"answer": "They both like hiking", "citations": ["E1"], "in_memory": True},
    "Which city would Bo likely visit next?": {"answer": "Berlin", "citations": [], "in_memory": True},
    "What is Bo's cat called?": {"answer": "", "citations": [], "in_memory": False},
}


def _question(prompt: str) -> str:
    return re.search(r"^Question: (.*)$", prompt, re.MULTILINE).group(1)


def _judge(request) -> dict:
    gold = re.search(r"^Gold answer: (.*)$", request.user, re.MULTILINE).group(1)
    generated = re.search(r"^Generated answer: (.*)$", request.user, re.MULTILINE).group(1)
    return {"reasoning": "scripted", "label": "CORRECT" if gold.lower() in generated.lower() else "WRONG"}


@pytest.fixture
def locomo_folder(tmp_path: Path) -> Path:
    (tmp_path / "tiny.json").write_text(json.dumps({"conversation": CONVERSATION, "qa": QUESTIONS}), encoding="utf-8")
    return tmp_path


@pytest.mark.usefixtures("declared_plugins")
async def test_bench_qa_runs_and_counts(locomo_folder: Path, database_url: str, scripted_llm) -> None:
    scripted_llm.on("answer", lambda request: REPLIES[_question(request.user)])
    scripted_llm.on("judge", _judge)
    settings = Settings(
        database=DatabaseSettings(url=database_url),
        models=ModelSettings(llm_base_url=scripted_llm.base_url, llm_api_key="test", llm_model="scripted"),
    )
    argv = ["bench", "qa", "--locomo", str(locomo_folder)]
    args = build_parser(argv).parse_args(argv)
    result = await args.module.run(args, settings)
    assert result["bench"] == "qa" and result["questions"] == 5
    assert (result["correct"], result["graded"], result["accuracy"]) == (2, 4, 0.5)
    assert {c: (v["questions"], v["correct"]) for c, v in result["by_category"].items()} == {
        "1": (1, 1),
        "2": (1, 0),
        "3": (1, 0),
        "4": (1, 1),
    }
    assert result["adversarial"] == {"questions": 1, "declined": 1}
    assert scripted_llm.count("judge") == 4 and scripted_llm.count("answer") == 5
    assert scripted_llm.count("extract") >= 1
    usage = {(u["phase"], u["operation"]): u["calls"] for u in result["usage"]}
    assert usage[("retrieval", "judge")] == 4 and usage[("retrieval", "answer")] == 5
    assert usage[("retrieval", "embed_query")] == 5 and usage[("ingestion", "extract")] >= 1
    assert "accuracy 50.0% (2/4" in args.module.render(result)


@pytest.mark.usefixtures("declared_plugins")
async def test_bench_qa_needs_an_llm(locomo_folder: Path, database_url: str) -> None:
    argv = ["bench", "qa", "--locomo", str(locomo_folder)]
    args = build_parser(argv).parse_args(argv)
    with pytest.raises(ConfigurationError, match="needs an LLM"):
        await args.module.run(
            args, Settings(database=DatabaseSettings(url=database_url), models=ModelSettings(llm_base_url=None, llm_api_key=None))
        )
