"""Who asks: every command of the memory API names its principal, and the audit log
and answer traces record it in its ``kind:id`` form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory.validation import normalize_id

PrincipalKind = Literal["operator", "user", "event", "job"]
Role = Literal["user", "admin", "bot"]


@dataclass(frozen=True)
class Principal:
    """Who asks: a platform user (with the role the platform gives), a platform event
    (a delete or edit the platform reported), a scheduled job, or the operator (the
    command line, which has database access anyway)."""

    kind: PrincipalKind
    id: str
    role: Role = "user"

    @classmethod
    def operator(cls, name: str) -> Principal:
        return cls("operator", name, "admin")

    @classmethod
    def user(cls, user_id: str, role: Role = "user") -> Principal:
        return cls("user", user_id, role)

    @classmethod
    def event(cls, event_id: str) -> Principal:
        return cls("event", event_id)

    @classmethod
    def job(cls, name: str) -> Principal:
        return cls("job", name)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", normalize_id(self.id, "principal"))

    def __str__(self) -> str:
        """The audit log's form: ``kind:id``."""
        return f"{self.kind}:{self.id}"
