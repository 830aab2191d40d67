"""bot/settings.py: the settings nested by concern, each read from its environment
variables (each a row of its concern's table in docs/reference/settings.md, with its
default), every number bounded."""

from __future__ import annotations

import re
from pathlib import Path

import annotated_types
import pytest
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from bot.settings import ChatSettings, DatabaseSettings, ModelSettings, Settings, load_settings, revealed
from connectors.discord.rest import DiscordEndpoints
from connectors.slack.app import SlackConfig
from connectors.slack.installations import OAuthConfig
from jobs import JobSettings
from memory import ConfigurationError

CONCERNS = {"database": DatabaseSettings, "models": ModelSettings, "chat": ChatSettings, "jobs": JobSettings}
SETTINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "settings.md"
# A row of a settings table: | `VARIABLE` | default | meaning |
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \| ([^|]*?) \|", re.MULTILINE)


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


def documented_rows(page: str) -> dict[str, list[tuple[str, str]]]:
    """``{concern: [(variable, default cell), ...]}`` from the page's tables, a concern
    being a ``## name`` section (its ``###`` subsections included). Pure."""
    sections = re.split(r"^## ", page, flags=re.MULTILINE)[1:]
    return {section.split("\n", 1)[0].strip(): ROW.findall(section) for section in sections}


def documented_default(cell: str) -> object:
    """What a default cell says: ``unset`` (None), ``empty`` (""), a value in backticks
    (its text), or prose (a default computed at run time, returned as ``...``). Pure."""
    if cell == "unset":
        return None
    if cell == "empty":
        return ""
    if re.fullmatch(r"`[^`]*`", cell):
        return cell.strip("`")
    return ...


def _spelled(value: object) -> object:
    """A default as the page spells it: booleans as 1/0, whole floats without ``.0``."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if value is None else str(value)


def test_the_row_reader() -> None:
    page = "## models\n\n| variable | default | meaning |\n|---|---|---|\n| `A_B` | `3` | x |\n| `C_D` | unset | y |\n"
    assert documented_rows(page) == {"models": [("A_B", "`3`"), ("C_D", "unset")]}
    assert [documented_default(c) for c in ("unset", "empty", "`0.5`", "the user data dir")] == [None, "", "0.5", ...]


def test_the_settings_page_lists_every_variable_in_its_concern_with_its_default() -> None:
    """Each variable has one row, in its concern's section, and the row's default is the
    field's; a row for a variable that is no setting fails too (docs/reference/settings.md)."""
    rows = documented_rows(SETTINGS_PAGE.read_text(encoding="utf-8"))
    where = {variable: concern for concern, found in rows.items() for variable, _ in found}
    listed = [variable for found in rows.values() for variable, _ in found]
    assert len(listed) == len(set(listed)), "a variable has two rows"
    fields = {_variable(field): (concern, field) for concern, _, field in _fields()}
    assert set(where) == set(fields), {"not on the page": set(fields) - set(where), "no such setting": set(where) - set(fields)}
    assert {v: where[v] for v in fields if where[v] != fields[v][0]} == {}, "in another concern's section"
    wrong = {}
    for variable, cell in (row for found in rows.values() for row in found):
        field = fields[variable][1]
        said = documented_default(cell)
        # Prose is for a default computed at run time (a data folder) only.
        if (said is ... and field.default_factory is None) or (said is not ... and said != _spelled(field.default)):
            wrong[variable] = (cell, field.default)
    assert wrong == {}


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


SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-secret-bot-token",
    "SLACK_SIGNING_SECRET": "secret-signing-value",
    "SLACK_APP_TOKEN": "xapp-secret-app-token",
    "SLACK_CLIENT_SECRET": "secret-client-value",
    "DISCORD_BOT_TOKEN": "secret-discord-token",
    "STASHBIRD_EMBEDDING_API_KEY": "sk-secret-embedding-key",
    "STASHBIRD_LLM_API_KEY": "sk-secret-llm-key",
}


def test_no_secret_shows_in_the_repr_or_str_of_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A careless log line of the settings (or of a concern, or of a config the service
    builds from them) must not leak a token; the clients still get each value."""
    for variable, value in SECRETS.items():
        monkeypatch.setenv(variable, value)
    settings = load_settings()
    shown = [repr(settings), str(settings), settings.model_dump_json()]
    shown += [text for concern in (settings.models, settings.chat) for text in (repr(concern), str(concern))]
    assert not [value for value in SECRETS.values() for text in shown if value in text]
    assert revealed(settings.chat.slack_bot_token) == SECRETS["SLACK_BOT_TOKEN"]
    assert revealed(settings.models.llm_api_key) == SECRETS["STASHBIRD_LLM_API_KEY"]


def test_every_key_token_secret_or_password_setting_is_a_secret_type() -> None:
    """A setting added later whose variable is named like a secret is held as one too."""
    named = [(c, n, f) for c, n, f in _fields() if re.search(r"(KEY|TOKEN|SECRET|PASSWORD)$", _variable(f))]
    assert {_variable(f) for _, _, f in named} == set(SECRETS)
    assert all(f.annotation == SecretStr | None for _, _, f in named)


def test_the_connector_configs_leave_their_secrets_out_of_their_repr() -> None:
    """What the settings' secrets are unwrapped into (bot/service.py) hides them too."""
    slack = repr(SlackConfig("xoxb-secret-bot-token", "secret-signing-value", app_token="xapp-secret"))
    oauth = repr(OAuthConfig("client-id", "secret-client-value", "postgresql://u:secret-password@h/db"))
    discord = repr(DiscordEndpoints("secret-discord-token", "http://api", "ws://gateway"))
    for text in (slack, oauth, discord):
        assert "secret" not in text, text
