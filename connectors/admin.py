"""``/memory`` admin commands: parse the command text, run the audit query of the memory
core, render it as a short chat message.

The queries are the core's audit API (``about``, ``explain``, ``forgotten``,
``provenance``, ``stats``); who may run them is the core's rule table's to say
(memory/rules.py: the conversation's admins and STASHBIRD_ADMIN_IDS), which logs every
request, granted or refused, in the conversation's audit log; a refusal is answered
with ``REFUSAL``. A chat message is short: at most ``SHOWN`` items of a list, with how
many more there are.
"""

from __future__ import annotations

from memory import (
    About,
    AccessDenied,
    ConversationRef,
    DeletionLog,
    Explanation,
    Memory,
    Principal,
    Provenance,
    Stats,
    UnknownConversation,
    ValidationError,
    about,
    explain,
    forgotten,
    provenance,
    stats,
)

REFUSAL = "Sorry: /memory is for server or workspace admins only."
HELP = (
    "/memory about <name> · why <answer number> · forgotten · provenance <message id> · stats\n"
    "Audit this channel's memory: what it holds about something, why an answer said what it did, "
    "what was forgotten, what rests on a message, and totals."
)
SHOWN = 5
EMPTY = "Nothing is stored for this channel yet."


def parse_command(text: str) -> tuple[str, str]:
    """``"about Maya Lee"`` -> ``("about", "Maya Lee")``; empty -> ``("help", "")``. Pure."""
    verb, _, argument = text.strip().partition(" ")
    return (verb.lower() or "help"), argument.strip()


def _more(lines: list[str], total: int) -> list[str]:
    return lines[:SHOWN] + ([f"… and {total - SHOWN} more"] if total > SHOWN else [])


def render_about(result: About) -> str:
    if not result.entities:
        return f"Nothing in this channel's memory matches “{result.query}”."
    lines: list[str] = []
    for entity in result.entities[:SHOWN]:
        kind = "anchor (kept for its relations)" if entity.is_anchor else entity.type
        lines.append(f"*{entity.name}* ({kind}, mentioned in {entity.mentions} messages)")
        lines += [f"  • {fact.fact} ({fact.message_count} messages)" for fact in entity.current[:SHOWN]]
        lines += [f"  • ~{fact.fact}~ superseded" for fact in entity.superseded[:SHOWN]]
    if len(result.entities) > SHOWN:
        lines.append(f"… and {len(result.entities) - SHOWN} more matches")
    return "\n".join(lines)


def render_explain(result: Explanation) -> str:
    head = f"Answer {result.answer_id} to “{result.question}” (asked by {result.asked_by}, {result.asked_at:%d %b %Y %H:%M})"
    if result.answer is None:
        gone = ", ".join(f"{w.action} of message {w.platform_message_id}" for w in result.withdrawn_because)
        return f"{head}\nwithdrawn: a message it drew on changed ({gone or 'since'})."
    evidence = [f"• [{e.label}] {e.kind}: {e.text if e.text is not None else '(removed since)'}" for e in result.evidence]
    return "\n".join([head, f"said: {result.answer}", "evidence:", *_more(evidence, len(evidence))])


def render_forgotten(result: DeletionLog) -> str:
    if not result.entries:
        return "Nothing has been forgotten in this channel."
    lines = [
        f"• {e.at:%d %b %H:%M} {e.action} of message {e.platform_message_id} ({e.status}, asked by {e.requested_by})"
        + (": " if any(e.counts.values()) else "")  # an edit may remove nothing derived
        + ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in e.counts.items() if count)
        for e in result.entries
    ]
    return "\n".join(_more(lines, len(lines)))


def render_provenance(result: Provenance) -> str:
    if result.status != "stored":
        return f"Message {result.platform_message_id} is {result.status}: nothing rests on it any more."
    counts = result.dry_run.counts()
    records = (*result.entities, *result.relations)
    derived = [f"• {d.kind} {d.text} ({d.other_support} other messages)" for d in records]
    lines = [f"Message {result.platform_message_id} supports:", *_more(derived, len(records))]
    lines.append(
        f"Forgetting it would remove {counts['relations_removed']} relations and {counts['entities_removed']} entities, "
        f"keep {counts['relations_kept']} relations, anchor {counts['entities_anchored']} entities; "
        f"{len(result.answers)} answers drew on it."
    )
    return "\n".join(lines)


def render_stats(result: Stats) -> str:
    return (
        f"{result.messages} messages by {result.speakers} speakers; "
        f"{result.entities} entities ({result.anchors} anchors), {result.relations_active} facts "
        f"({result.relations_superseded} superseded), {result.communities} communities; "
        f"{result.answers} answers, {result.deletions} deletions; {result.waiting} messages waiting for consolidation.\n"
        f"Messages are kept {result.retention.describe()}; {result.opted_out} people opted out of this workspace."
    )


async def run(memory: Memory, conversation: ConversationRef, text: str, principal: Principal) -> str:
    """The command's answer as plain text (the platform posts it ephemerally)."""
    verb, argument = parse_command(text)
    try:
        if verb == "about":
            return render_about(await about(memory, conversation, argument, principal=principal))
        if verb == "why":
            if not argument.isdigit():
                return "/memory why: give the answer's number (it is shown under each answer), e.g. /memory why 12"
            return render_explain(await explain(memory, conversation, int(argument), principal=principal))
        if verb == "forgotten":
            return render_forgotten(await forgotten(memory, conversation, principal=principal))
        if verb == "provenance":
            return render_provenance(await provenance(memory, conversation, argument, principal=principal))
        if verb == "stats":
            return render_stats(await stats(memory, conversation, principal=principal))
    except AccessDenied:
        return REFUSAL
    except UnknownConversation:
        return EMPTY
    except ValidationError as error:
        return f"/memory {verb}: {error}"
    return HELP
