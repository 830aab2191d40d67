"""Configuration from the environment (every variable is listed in the README)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field
from pydantic import ValidationError as SettingsError
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory import ConfigurationError, default_data_dir

if TYPE_CHECKING:
    from jobs import JobSettings


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    database_url: str | None = Field(None, validation_alias=_env("DATABASE_URL"))
    data_dir: Path = Field(default_factory=default_data_dir, validation_alias=_env("STASHBIRD_DATA_DIR"))
    database_name: str = Field("stashbird", validation_alias=_env("STASHBIRD_DATABASE_NAME"))

    embedding_dim: int = Field(384, ge=1, le=2000, validation_alias=_env("STASHBIRD_EMBEDDING_DIM"))
    embedding_base_url: str | None = Field(None, validation_alias=_env("STASHBIRD_EMBEDDING_BASE_URL"))
    embedding_api_key: str | None = Field(None, validation_alias=_env("STASHBIRD_EMBEDDING_API_KEY"))
    embedding_model: str = Field("text-embedding-3-small", validation_alias=_env("STASHBIRD_EMBEDDING_MODEL"))
    embedding_threads: int = Field(1, ge=0, le=256, validation_alias=_env("STASHBIRD_EMBEDDING_THREADS"))

    llm_base_url: str | None = Field(None, validation_alias=_env("STASHBIRD_LLM_BASE_URL"))
    llm_api_key: str | None = Field(None, validation_alias=_env("STASHBIRD_LLM_API_KEY"))
    llm_model: str = Field("gpt-4o-mini", validation_alias=_env("STASHBIRD_LLM_MODEL"))
    llm_timeout: float = Field(60.0, gt=0, le=3600, allow_inf_nan=False, validation_alias=_env("STASHBIRD_LLM_TIMEOUT"))
    llm_max_retries: int = Field(3, ge=0, le=20, validation_alias=_env("STASHBIRD_LLM_MAX_RETRIES"))
    llm_response_format: Literal["auto", "json_schema", "json_object", "none"] = Field(
        "auto", validation_alias=_env("STASHBIRD_LLM_RESPONSE_FORMAT")
    )

    slack_bot_token: str | None = Field(None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_signing_secret: str | None = Field(None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_app_token: str | None = Field(None, validation_alias=_env("SLACK_APP_TOKEN"))
    slack_api_url: str = Field("https://slack.com/api/", validation_alias=_env("SLACK_API_URL"))
    slack_events_path: str = Field("/slack/events", validation_alias=_env("SLACK_EVENTS_PATH"))
    slack_client_id: str | None = Field(None, validation_alias=_env("SLACK_CLIENT_ID"))
    slack_client_secret: str | None = Field(None, validation_alias=_env("SLACK_CLIENT_SECRET"))
    slack_forget_on_uninstall: bool = Field(False, validation_alias=_env("SLACK_FORGET_ON_UNINSTALL"))
    http_host: str = Field("0.0.0.0", validation_alias=_env("STASHBIRD_HTTP_HOST"))
    http_port: int = Field(3000, ge=0, le=65535, validation_alias=_env("STASHBIRD_HTTP_PORT"))  # 0 picks a free one
    workers: int = Field(4, ge=1, le=1000, validation_alias=_env("STASHBIRD_WORKERS"))
    sweep_days: int = Field(7, ge=1, le=3650, validation_alias=_env("STASHBIRD_SWEEP_DAYS"))
    sweep_hours: float = Field(6.0, ge=0, le=24 * 365, allow_inf_nan=False, validation_alias=_env("STASHBIRD_SWEEP_HOURS"))
    serve_jobs: bool = Field(True, validation_alias=_env("STASHBIRD_SERVE_JOBS"))
    vacuum_seconds: float = Field(60.0, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_VACUUM_SECONDS"))
    inbox_stuck_seconds: float = Field(300.0, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_INBOX_STUCK_SECONDS"))
    reply_give_up_seconds: float = Field(
        21_600.0, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_REPLY_GIVE_UP_SECONDS")
    )
    sweep_max_share: float = Field(0.5, gt=0, le=1, allow_inf_nan=False, validation_alias=_env("STASHBIRD_SWEEP_MAX_SHARE"))
    sweep_min_missing: int = Field(5, ge=1, validation_alias=_env("STASHBIRD_SWEEP_MIN_MISSING"))
    discord_bot_token: str | None = Field(None, validation_alias=_env("DISCORD_BOT_TOKEN"))
    discord_api_base: str = Field("https://discord.com/api/v10", validation_alias=_env("DISCORD_API_BASE"))
    discord_gateway_url: str = Field("wss://gateway.discord.gg/", validation_alias=_env("DISCORD_GATEWAY_URL"))
    admin_ids: str = Field("", validation_alias=_env("STASHBIRD_ADMIN_IDS"))
    # unset: keep; memory/retention_window.py MAX_DAYS is the bound
    retention_days: int | None = Field(None, ge=1, le=36_500, validation_alias=_env("STASHBIRD_RETENTION_DAYS"))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", validation_alias=_env("STASHBIRD_LOG_LEVEL"))

    # The scheduler's settings: bounds here, defaults in jobs/settings.py (unset: its default).
    jobs_interval: float | None = Field(None, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_JOBS_INTERVAL"))
    consolidate_tokens: int | None = Field(None, ge=0, validation_alias=_env("STASHBIRD_CONSOLIDATE_TOKENS"))
    consolidate_idle_seconds: float | None = Field(
        None, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_CONSOLIDATE_IDLE_SECONDS")
    )
    consolidate_max_wait_seconds: float | None = Field(
        None, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_CONSOLIDATE_MAX_WAIT_SECONDS")
    )
    consolidate_max_tokens: int | None = Field(None, ge=0, validation_alias=_env("STASHBIRD_CONSOLIDATE_MAX_TOKENS"))
    job_lease_seconds: float | None = Field(None, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_JOB_LEASE_SECONDS"))
    jobs_shutdown_grace: float | None = Field(
        None, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_JOBS_SHUTDOWN_GRACE")
    )
    jobs_misfire_grace: int | None = Field(None, ge=1, validation_alias=_env("STASHBIRD_JOBS_MISFIRE_GRACE"))
    community_rebuild_share: float | None = Field(
        None, ge=0, le=1, allow_inf_nan=False, validation_alias=_env("STASHBIRD_COMMUNITY_REBUILD_SHARE")
    )
    backlog_shed_messages: int | None = Field(None, ge=0, validation_alias=_env("STASHBIRD_BACKLOG_SHED_MESSAGES"))

    def job_settings(self) -> JobSettings:
        """The scheduler's settings: what the environment sets, the scheduler's defaults
        for the rest."""
        from jobs import JobSettings  # the scheduler's package, imported by the commands that run it

        given: dict[str, Any] = {
            "interval_seconds": self.jobs_interval,
            "consolidate_tokens": self.consolidate_tokens,
            "consolidate_idle_seconds": self.consolidate_idle_seconds,
            "consolidate_max_wait_seconds": self.consolidate_max_wait_seconds,
            "consolidate_max_tokens": self.consolidate_max_tokens,
            "lease_seconds": self.job_lease_seconds,
            "shutdown_grace": self.jobs_shutdown_grace,
            "misfire_grace_seconds": self.jobs_misfire_grace,
            "rebuild_share": self.community_rebuild_share,
            "shed_messages": self.backlog_shed_messages,
        }
        return JobSettings(**{name: value for name, value in given.items() if value is not None})

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm_base_url or self.llm_api_key)

    @property
    def admins(self) -> frozenset[str]:
        return frozenset(part.strip() for part in self.admin_ids.split(",") if part.strip())


def load_settings() -> Settings:
    """The settings, or one ``ConfigurationError`` naming the variable at fault (the
    vector index holds at most 2,000 dimensions, hence that bound)."""
    try:
        return Settings()
    except SettingsError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        secret = any(word in where for word in ("KEY", "TOKEN", "SECRET", "URL"))
        shown = where if secret else f"{where}={first.get('input')!r}"
        raise ConfigurationError(f"{shown}: {first['msg']}") from None
