"""``/memory`` admin commands: parse the command text, run the query, render plain text.

Only the service calls this, and only for admins; everyone else gets ``REFUSAL``.
Commands (the audit queries): ``about <name>``, ``why <answer id>``, ``forgotten``,
``provenance <message id>``, ``stats``, ``help``.
"""

from __future__ import annotations

from memory import ConversationRef, Memory, Principal, facts, messages, pending

REFUSAL = "Sorry: /memory is for workspace admins only."
HELP = (
    "/memory about <name> · why <answer id> · forgotten · provenance <message id> · stats\n"
    "Audit this channel's memory: what it holds about something, why an answer said what it did, "
    "what was forgotten, which facts rest on a message, and totals."
)
AUDIT_VERBS = ("about", "why", "forgotten", "provenance")


def parse_command(text: str) -> tuple[str, str]:
    """``"about Maya Lee"`` -> ``("about", "Maya Lee")``; empty -> ``("help", "")``. Pure."""
    verb, _, argument = text.strip().partition(" ")
    return (verb.lower() or "help"), argument.strip()


async def run(memory: Memory, conversation: ConversationRef, text: str, principal: Principal) -> str:
    """The command's answer as plain text (the platform posts it ephemerally)."""
    verb, argument = parse_command(text)
    if verb == "stats":
        return await _stats(memory, conversation, principal)
    if verb in AUDIT_VERBS:
        return f"/memory {verb}: the audit queries are not part of this build yet."
    return HELP


async def _stats(memory: Memory, conversation: ConversationRef, principal: Principal) -> str:
    stored = await messages(memory, conversation, principal=principal)
    relations = await facts(memory, conversation, principal=principal)
    active = sum(1 for relation in relations if relation.get("status") == "active")
    waiting = await pending(memory, conversation, principal=principal)
    return (
        f"{len(stored)} messages stored, {waiting} waiting for consolidation; "
        f"{active} active facts ({len(relations) - active} superseded)."
    )
