"""Errors the memory core raises for callers to report."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.store.ledger import Usage


class StashbirdError(Exception):
    """Base class for errors a user should see as a clear message."""


class ValidationError(StashbirdError):
    """Input refused; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ConfigurationError(StashbirdError):
    """The store and the configuration disagree (e.g. the embedding dimension)."""


class UnknownConversation(ValidationError):
    """A command named a conversation this store does not hold."""

    def __init__(self, conversation: str) -> None:
        super().__init__("conversation", f"no conversation {conversation!r} in memory")
        self.conversation = conversation


class AccessDenied(StashbirdError):
    """A principal asked for a command its rule (memory/access.py) does not grant it (the refusal is logged)."""

    def __init__(
        self,
        principal: str,
        conversation: str,
        operation: str = "audit",
        allowed: str = "the operator, an admin of the conversation or a user in STASHBIRD_ADMIN_IDS",
    ) -> None:
        where = "every conversation" if conversation == "*" else f"conversation {conversation!r}"
        super().__init__(f"principal: {principal} may not run {operation} in {where}; only {allowed} may")
        self.principal = principal
        self.conversation = conversation
        self.operation = operation


class ModelUnavailable(StashbirdError):
    """A model endpoint (embeddings) could not be reached or refused the call."""


class LLMError(StashbirdError):
    """An LLM call failed after its last try (or on a reply that retrying cannot fix).

    ``usage`` holds what the failed attempts cost, so a caller may still record it.
    """

    def __init__(self, message: str, *, operation: str | None = None, attempts: int = 0, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.operation = operation
        self.attempts = attempts
        self.usage = usage
