"""Configuration from the environment (every variable is listed in docs/reference/settings.md), nested
by concern: ``settings.database``, ``settings.models``, ``settings.chat`` and
``settings.jobs`` (the scheduler's, jobs/settings.py).

Each concern reads its own variables (names unchanged), with each default and each bound
written once, beside the field; ``load_settings`` reads them all at start-up and turns
the first bad value into one line naming its variable. To add a setting: one field in
its concern, ``Field(default, <bounds for a number>, validation_alias=_env("NAME"))``,
and a row in its concern's table of docs/reference/settings.md (tests/pure/test_settings.py
checks both). A key, token, secret or password is a ``SecretStr``, so that a repr or a
log line of the settings never shows it: its user calls ``.get_secret_value()`` where it
hands the value to the client that sends it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr
from pydantic import ValidationError as SettingsError
from pydantic_settings import BaseSettings, SettingsConfigDict

from jobs.settings import JobSettings
from memory import ConfigurationError, default_data_dir


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class _Concern(BaseSettings):
    """One concern's settings, read from the environment when made without arguments."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class DatabaseSettings(_Concern):
    url: str | None = Field(None, validation_alias=_env("DATABASE_URL"))
    data_dir: Path = Field(default_factory=default_data_dir, validation_alias=_env("STASHBIRD_DATA_DIR"))
    name: str = Field("stashbird", validation_alias=_env("STASHBIRD_DATABASE_NAME"))


class ModelSettings(_Concern):
    """The embedder and the LLM (the vector index holds at most 2,000 dimensions)."""

    embedding_dim: int = Field(384, ge=1, le=2000, validation_alias=_env("STASHBIRD_EMBEDDING_DIM"))
    embedding_base_url: str | None = Field(None, validation_alias=_env("STASHBIRD_EMBEDDING_BASE_URL"))
    embedding_api_key: SecretStr | None = Field(None, validation_alias=_env("STASHBIRD_EMBEDDING_API_KEY"))
    embedding_model: str = Field("text-embedding-3-small", validation_alias=_env("STASHBIRD_EMBEDDING_MODEL"))
    embedding_threads: int = Field(1, ge=0, le=256, validation_alias=_env("STASHBIRD_EMBEDDING_THREADS"))

    llm_base_url: str | None = Field(None, validation_alias=_env("STASHBIRD_LLM_BASE_URL"))
    llm_api_key: SecretStr | None = Field(None, validation_alias=_env("STASHBIRD_LLM_API_KEY"))
    llm_model: str = Field("gpt-4o-mini", validation_alias=_env("STASHBIRD_LLM_MODEL"))
    llm_timeout: float = Field(60.0, gt=0, le=3600, allow_inf_nan=False, validation_alias=_env("STASHBIRD_LLM_TIMEOUT"))
    llm_max_retries: int = Field(3, ge=0, le=20, validation_alias=_env("STASHBIRD_LLM_MAX_RETRIES"))
    llm_response_format: Literal["auto", "json_schema", "json_object", "none"] = Field(
        "auto", validation_alias=_env("STASHBIRD_LLM_RESPONSE_FORMAT")
    )

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm_base_url or self.llm_api_key)


class ChatSettings(_Concern):
    """The chat service: the platforms, its HTTP endpoint, inbox, replies, sweep and
    vacuum, who counts as an admin, its log level."""

    slack_bot_token: SecretStr | None = Field(None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_app_token: SecretStr | None = Field(None, validation_alias=_env("SLACK_APP_TOKEN"))
    slack_api_url: str = Field("https://slack.com/api/", validation_alias=_env("SLACK_API_URL"))
    slack_events_path: str = Field("/slack/events", validation_alias=_env("SLACK_EVENTS_PATH"))
    slack_client_id: str | None = Field(None, validation_alias=_env("SLACK_CLIENT_ID"))
    slack_client_secret: SecretStr | None = Field(None, validation_alias=_env("SLACK_CLIENT_SECRET"))
    slack_forget_on_uninstall: bool = Field(False, validation_alias=_env("SLACK_FORGET_ON_UNINSTALL"))
    discord_bot_token: SecretStr | None = Field(None, validation_alias=_env("DISCORD_BOT_TOKEN"))
    discord_api_base: str = Field("https://discord.com/api/v10", validation_alias=_env("DISCORD_API_BASE"))
    discord_gateway_url: str = Field("wss://gateway.discord.gg/", validation_alias=_env("DISCORD_GATEWAY_URL"))

    http_host: str = Field("0.0.0.0", validation_alias=_env("STASHBIRD_HTTP_HOST"))
    http_port: int = Field(3000, ge=0, le=65535, validation_alias=_env("STASHBIRD_HTTP_PORT"))  # 0 picks a free one
    workers: int = Field(4, ge=1, le=1000, validation_alias=_env("STASHBIRD_WORKERS"))
    inbox_stuck_seconds: float = Field(300.0, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_INBOX_STUCK_SECONDS"))
    reply_give_up_seconds: float = Field(
        21_600.0, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_REPLY_GIVE_UP_SECONDS")
    )
    sweep_days: int = Field(7, ge=1, le=3650, validation_alias=_env("STASHBIRD_SWEEP_DAYS"))
    sweep_hours: float = Field(6.0, ge=0, le=24 * 365, allow_inf_nan=False, validation_alias=_env("STASHBIRD_SWEEP_HOURS"))
    sweep_max_share: float = Field(0.5, gt=0, le=1, allow_inf_nan=False, validation_alias=_env("STASHBIRD_SWEEP_MAX_SHARE"))
    sweep_min_missing: int = Field(5, ge=1, validation_alias=_env("STASHBIRD_SWEEP_MIN_MISSING"))
    serve_jobs: bool = Field(True, validation_alias=_env("STASHBIRD_SERVE_JOBS"))
    vacuum_seconds: float = Field(60.0, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_VACUUM_SECONDS"))
    admin_ids: str = Field("", validation_alias=_env("STASHBIRD_ADMIN_IDS"))
    # unset: keep; memory/privacy/retention.py MAX_DAYS is the bound
    retention_days: int | None = Field(None, ge=1, le=36_500, validation_alias=_env("STASHBIRD_RETENTION_DAYS"))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", validation_alias=_env("STASHBIRD_LOG_LEVEL"))
    # connectors/service.py ServiceConfig says what each choice does
    on_member_leave: Literal["keep", "forget"] = Field("keep", validation_alias=_env("STASHBIRD_ON_MEMBER_LEAVE"))
    on_bot_removed: Literal["stop", "forget"] = Field("stop", validation_alias=_env("STASHBIRD_ON_BOT_REMOVED"))

    @property
    def admins(self) -> frozenset[str]:
        return frozenset(part.strip() for part in self.admin_ids.split(",") if part.strip())


def revealed(secret: SecretStr | None) -> str | None:
    """A secret setting's value, unwrapped only where it is handed to the client (or the
    connector config, whose repr leaves it out) that sends it."""
    return None if secret is None else secret.get_secret_value()


class Settings(BaseModel):
    """Every concern; one not given is read from the environment."""

    model_config = ConfigDict(frozen=True)

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)


def load_settings() -> Settings:
    """The settings, or one ``ConfigurationError`` naming the variable at fault."""
    try:
        return Settings()
    except SettingsError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        secret = any(word in where for word in ("KEY", "TOKEN", "SECRET", "URL"))
        shown = where if secret else f"{where}={first.get('input')!r}"
        raise ConfigurationError(f"{shown}: {first['msg']}") from None
