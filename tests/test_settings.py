"""bot/settings.py: the settings nested by concern, each read from its environment
variables (named in the README's Configuration table), every number bounded."""

from __future__ import annotations

import re
from pathlib import Path

import annotated_types
import pytest
from pydantic.fields import FieldInfo

from bot.settings import ChatSettings, DatabaseSettings, ModelSettings, Settings, load_settings
from jobs import JobSettings
from memory import ConfigurationError

CONCERNS = {"database": DatabaseSettings, "models": ModelSettings, "chat": ChatSettings, "jobs": JobSettings}
README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _variable(field: FieldInfo) -> str:
    alias = field.validation_alias
    names = getattr(alias, "choices", [alias])
    assert len(names) == 1 and isinstance(names[0], str), names
    return names[0]


def _fields() -> list[tuple[str, str, FieldInfo]]:
    return [(concern, name, field) for concern, model in CONCERNS.items() for name, field in model.model_fields.items()]


def test_the_concerns_are_the_settings_and_each_variable_is_read_once() -> None:
    assert set(Settings.model_fields) == set(CONCERNS)
    assert all(Settings.model_fields[c].annotation is model for c, model in CONCERNS.items())
    variables = [_variable(field) for _, _, field in _fields()]
    assert len(variables) == len(set(variables)) >= 47


def test_every_variable_is_in_the_readme_configuration_table() -> None:
    table = README.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    assert {_variable(field) for _, _, field in _fields()} <= documented


def test_every_number_is_bounded() -> None:
    """A numeric setting has a lower bound at least, and a float no infinity or NaN."""
    numbers = [(c, n, f) for c, n, f in _fields() if f.annotation in (int, float)]
    assert len(numbers) > 20
    for concern, name, field in numbers:
        bounds = [m for m in field.metadata if isinstance(m, annotated_types.Ge | annotated_types.Gt)]
        assert bounds, f"{concern}.{name} has no lower bound"
        if field.annotation is float:
            assert any(getattr(m, "allow_inf_nan", True) is False for m in field.metadata), f"{concern}.{name} allows inf"


@pytest.mark.parametrize(
    ("variable", "value", "concern", "name", "read"),
    [
        ("DATABASE_URL", "postgresql://u@h/db", "database", "url", "postgresql://u@h/db"),
        ("STASHBIRD_LLM_TIMEOUT", "7.5", "models", "llm_timeout", 7.5),
        ("STASHBIRD_WORKERS", "9", "chat", "workers", 9),
        ("STASHBIRD_JOB_LEASE_SECONDS", "12", "jobs", "lease_seconds", 12.0),
    ],
)
def test_each_concern_reads_its_variables(
    variable: str, value: str, concern: str, name: str, read: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    assert getattr(getattr(load_settings(), concern), name) == read


def test_a_bad_value_in_any_concern_is_one_line_naming_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASHBIRD_JOBS_MISFIRE_GRACE", "0")
    with pytest.raises(
        ConfigurationError, match=r"^STASHBIRD_JOBS_MISFIRE_GRACE='0': Input should be greater than or equal to 1$"
    ):
        load_settings()
