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
    """A principal asked to audit a conversation it is not an admin of (the refusal is logged)."""

    def __init__(self, principal: str, conversation: str) -> None:
        super().__init__(
            f"principal: {principal} may not audit conversation {conversation!r}; only the operator, "
            "a platform admin of it, or a user listed in STASHBIRD_ADMIN_IDS may"
        )
        self.principal = principal
        self.conversation = conversation


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
