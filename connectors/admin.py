"""``/memory`` commands: parse the command text, run the memory core's command, render
its result as a short chat message.

Two kinds of subcommand. The audit queries (``about``, ``why``, ``forgotten``,
``provenance``, ``stats``) and the admins' decisions (``forget-user``, ``retention``)
are for the conversation's admins and STASHBIRD_ADMIN_IDS. The participant's own
(``forget-me``, ``ignore-me``, ``remember-me``, ``privacy``) are for anyone, acting on
themselves only: the core's ``OWN`` grant, with the caller's own id as the owner. Who may
run what is the core's access table's to say (memory/access.py), which logs every request,
granted or refused; a refusal names the refused subcommand (``refusal``). Forgetting a person is asked
twice: first a dry run says what would go, then ``confirm`` does it. A chat message is
short: at most ``SHOWN`` items of a list, with how many more there are.
"""

from __future__ import annotations

import re

from memory import (
    About,
    AccessDenied,
    ConversationRef,
    DeletionLog,
    Explanation,
    Memory,
    PersonForgetting,
    Principal,
    Provenance,
    Retention,
    Stats,
    UnknownConversation,
    ValidationError,
    about,
    explain,
    forget_author,
    forgotten,
    optout_status,
    parse_days,
    provenance,
    retention,
    set_optout,
    set_retention,
    stats,
)

OPEN = "/memory privacy, forget-me, ignore-me and remember-me are for everyone"
HELP = (
    "/memory about <name> · why <answer number> · forgotten · provenance <message id> · stats · "
    "forget-user @someone · retention 90d|off\n"
    "Audit this channel's memory (admins): what it holds about something, why an answer said what it did, "
    "what was forgotten, what rests on a message, totals; forget someone, set how long messages are kept.\n"
    "For anyone, about themselves: /memory privacy · forget-me · ignore-me · remember-me"
)
SHOWN = 5
EMPTY = "Nothing is stored for this channel yet."
CONFIRM = "confirm"
# What /memory privacy says, whatever the channel: docs/guarantees/privacy.md says the
# same, in these words (tests/service/test_connector_admin.py checks it).
PRIVACY = (
    "The bot keeps the messages of this channel it sees (text, author, time), the facts, names and "
    "summaries it derives from them, and its answers with the messages each one drew on.",
    "Every fact keeps the messages that support it: when a message is deleted or edited, what rested only on it goes.",
    "/memory ignore-me: your new messages are not stored (your questions to the bot are still answered, "
    "from others' messages); /memory remember-me undoes it.",
    "/memory forget-me: everything you wrote in this workspace or server is forgotten, with what rested only on it; "
    "facts others' messages also support stay, and others' messages that quote or name you are theirs "
    "and stay.",
    "Only admins and the operator see the audit log (/memory forgotten): what was forgotten, who opted out "
    "or back in, the retention runs, and who asked.",
    "More on the Privacy page of Stashbird's documentation (docs/guarantees/privacy.md).",
)
_TARGET = re.compile(r"<@!?([A-Za-z0-9]+)(?:\|[^>]*)?>|([A-Za-z0-9]+)")  # a mention, or a bare id


def parse_command(text: str) -> tuple[str, str]:
    """``"about Maya Lee"`` -> ``("about", "Maya Lee")``; empty -> ``("help", "")``. Pure."""
    verb, _, argument = text.strip().partition(" ")
    return (verb.lower() or "help"), argument.strip()


def refusal(verb: str) -> str:
    """The answer to someone the rules refuse: what is refused, in one line."""
    return f"Sorry: /memory {verb} is for server or workspace admins only ({OPEN})."


def parse_confirm(argument: str, verb: str) -> bool:
    """``""`` -> False (show what would go), ``"confirm"`` -> True. Pure."""
    word = argument.strip().lower()
    if word not in ("", CONFIRM):
        raise ValidationError(verb, f"add nothing or 'confirm', got {argument.strip()!r}")
    return word == CONFIRM


def parse_target(argument: str) -> tuple[str, bool]:
    """``"<@U123|ann> confirm"`` -> ``("U123", True)``: the person a command names (a Slack
    mention ``<@U123>`` or ``<@U123|name>``, a Discord one ``<@123>`` or ``<@!123>``, or a
    bare user id) and whether it is confirmed. Pure."""
    named, _, rest = argument.strip().partition(" ")
    found = _TARGET.fullmatch(named)
    if found is None:
        got = f", got {named!r}" if named else ""
        raise ValidationError("user", f"name the person by mentioning them (<@U…>) or by their user id{got}")
    return found.group(1) or found.group(2), parse_confirm(rest, "forget-user")


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
    """This channel's deletions and edits, then its workspace's people decisions."""
    lines = [
        f"• {e.at:%d %b %H:%M} {e.action} of {e.message} ({e.status}, asked by {e.requested_by})"
        + (": " if any(e.counts.values()) else "")  # an edit may remove nothing derived
        + ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in e.counts.items() if count)
        for e in result.entries
    ]
    out = _more(lines, len(lines)) if lines else ["Nothing has been forgotten in this channel."]
    people = [f"• {e.at:%d %b %H:%M} {e.action} {e.summary} (asked by {e.requested_by}: {e.principal})" for e in result.people]
    return "\n".join(out + (["In this workspace:", *_more(people, len(people))] if people else []))


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


def render_person(result: PersonForgetting, command: str) -> str:
    """A person's forgetting; a dry run ends with how to go ahead."""
    lines = result.lines()
    if result.dry_run and result.messages:
        lines.append(f"Reply /memory {command} {CONFIRM} to go ahead.")
    return "\n".join(lines)


def render_privacy(window: Retention, opted_out: bool) -> str:
    """What the bot keeps and how to decide about it, for anyone in the channel."""
    you = "You are opted out: your new messages are not stored." if opted_out else "Your messages are stored."
    return "\n".join([PRIVACY[0], f"Messages here are kept {window.describe()}.", *PRIVACY[1:], you])


async def _own(memory: Memory, conversation: ConversationRef, verb: str, argument: str, principal: Principal) -> str | None:
    """The participant's own subcommands (None: ``verb`` is not one of them)."""
    workspace = conversation.workspace
    if verb == "privacy":
        window = await retention(memory, conversation, principal=principal)
        out = await optout_status(memory, principal.id, workspace=workspace, principal=principal)
        return render_privacy(window, out)
    if verb in ("ignore-me", "remember-me"):
        ignore = verb == "ignore-me"
        await set_optout(memory, principal.id, workspace=workspace, opted_out=ignore, principal=principal)
        if ignore:
            return (
                "From now on your new messages in this workspace or server are not stored; your questions are still answered. "
                "Your past messages stay: /memory forget-me forgets them too. /memory remember-me undoes this."
            )
        return "Your new messages are stored again."
    if verb == "forget-me":
        confirmed = parse_confirm(argument, verb)
        result = await forget_author(memory, principal.id, workspace=workspace, principal=principal, dry_run=not confirmed)
        return render_person(result, verb)
    return None


async def run(memory: Memory, conversation: ConversationRef, text: str, principal: Principal) -> tuple[str, bool]:
    """The command's answer as plain text (the platform posts it ephemerally), and
    whether it is a refusal."""
    verb, argument = parse_command(text)
    try:
        return await _answer(memory, conversation, verb, argument, principal), False
    except AccessDenied:
        return refusal(verb), True
    except UnknownConversation:
        return EMPTY, False
    except ValidationError as error:
        return f"/memory {verb}: {error.message if error.field == verb else error}", False


async def _answer(memory: Memory, conversation: ConversationRef, verb: str, argument: str, principal: Principal) -> str:
    """The subcommand's answer; the core raises for a refusal or bad input."""
    own = await _own(memory, conversation, verb, argument, principal)
    if own is not None:
        return own
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
    if verb == "forget-user":
        author, confirmed = parse_target(argument)
        workspace = conversation.workspace
        result = await forget_author(memory, author, workspace=workspace, principal=principal, dry_run=not confirmed)
        return render_person(result, f"forget-user {author}")
    if verb == "retention":
        await set_retention(memory, conversation, parse_days(argument, "retention"), principal=principal)
        window = await retention(memory, conversation, principal=principal)
        return f"Messages here are now kept {window.describe()}."
    return HELP
