"""Every system prompt lives in memory/prompts.py: a prompt assigned anywhere else in
memory/ (a module-level ``*_SYSTEM`` or ``SYSTEM`` string) fails here, so the next step
that talks to a model puts its prompt beside the others."""

from __future__ import annotations

import ast
from pathlib import Path

import memory
from memory import prompts

MEMORY = Path(memory.__file__).parent


def prompt_assignments(path: Path) -> list[str]:
    """Module-level names ending in SYSTEM that are bound to a string (or an f-string)."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        is_text = isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Constant) and isinstance(value.value, str))
        for target in targets:
            if isinstance(target, ast.Name) and target.id.endswith("SYSTEM") and is_text:
                found.append(target.id)
    return found


def test_no_prompt_outside_the_prompts_module() -> None:
    strays = {
        str(path.relative_to(MEMORY)): names
        for path in sorted(MEMORY.rglob("*.py"))
        if path.name != "prompts.py" and (names := prompt_assignments(path))
    }
    assert strays == {}


def test_the_prompts_module_holds_every_step_prompt() -> None:
    names = prompt_assignments(MEMORY / "prompts.py")
    assert set(names) == {
        "EXTRACT_SYSTEM",
        "SUMMARY_SYSTEM",
        "RESOLVE_SYSTEM",
        "COMPRESS_SYSTEM",
        "COMMUNITY_SYSTEM",
        "DECOMPOSE_SYSTEM",
        "RERANK_SYSTEM",
        "ANSWER_SYSTEM",
    }
    assert str(prompts.SUMMARY_WORDS) in prompts.EXTRACT_SYSTEM
    assert "{budget}" in prompts.COMPRESS_SYSTEM and "{limit}" in prompts.DECOMPOSE_SYSTEM


def test_the_guard_sees_a_stray_prompt(tmp_path: Path) -> None:
    stray = tmp_path / "stray.py"
    stray.write_text('RERANK_SYSTEM = (\n    "Score it."\n)\nOTHER = "x"\nSYSTEM: str = f"{OTHER}"\n', encoding="utf-8")
    assert prompt_assignments(stray) == ["RERANK_SYSTEM", "SYSTEM"]
