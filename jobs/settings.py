"""The scheduler's settings: each default written here once, each bound beside it, read
from the environment (the variables docs/reference/settings.md lists) when made without arguments.
``bot/settings.py`` holds them as its ``jobs`` concern; the scheduler takes them as given."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class JobSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    # how often each job looks for due work
    interval_seconds: float = Field(5.0, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_JOBS_INTERVAL"))
    # consolidate once this much text waits ...
    consolidate_tokens: int = Field(2_000, ge=0, validation_alias=_env("STASHBIRD_CONSOLIDATE_TOKENS"))
    # ... or the conversation was quiet this long
    consolidate_idle_seconds: float = Field(
        60.0, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_CONSOLIDATE_IDLE_SECONDS")
    )
    # ... or its oldest waiting message is this old
    consolidate_max_wait_seconds: float = Field(
        30.0, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_CONSOLIDATE_MAX_WAIT_SECONDS")
    )
    # one run takes at most this much of the oldest waiting text (0: all)
    consolidate_max_tokens: int = Field(4_000, ge=0, validation_alias=_env("STASHBIRD_CONSOLIDATE_MAX_TOKENS"))
    # a claim held by a dead process is free after this
    lease_seconds: float = Field(60.0, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_JOB_LEASE_SECONDS"))
    # a running item may finish for this long on shutdown
    shutdown_grace: float = Field(10.0, ge=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_JOBS_SHUTDOWN_GRACE"))
    # a firing this late is skipped (the next one runs)
    misfire_grace_seconds: int = Field(30, ge=1, validation_alias=_env("STASHBIRD_JOBS_MISFIRE_GRACE"))
    # full community rebuild past this share of new entities
    rebuild_share: float = Field(0.2, ge=0, le=1, allow_inf_nan=False, validation_alias=_env("STASHBIRD_COMMUNITY_REBUILD_SHARE"))
    # one community regeneration run re-summarises at most this many of a conversation's communities
    regenerate_max: int = Field(20, ge=1, le=10_000, validation_alias=_env("STASHBIRD_COMMUNITY_REGENERATE_MAX"))
    # past this many messages waiting for consolidation, derived work is shed (0: never)
    shed_messages: int = Field(5_000, ge=0, validation_alias=_env("STASHBIRD_BACKLOG_SHED_MESSAGES"))
    # a conversation whose work was shed is looked at again after this
    shed_retry_seconds: float = Field(
        30.0, gt=0, allow_inf_nan=False, validation_alias=_env("STASHBIRD_BACKLOG_SHED_RETRY_SECONDS")
    )
