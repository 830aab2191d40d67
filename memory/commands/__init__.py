"""The memory core's commands beside memory/api.py, grouped by what they serve: the
audit (``audit``), background work and the operator's maintenance (``work``), the
scheduler's claims and run log (``claims``), the chat service's durable inbox and the
jobs' cursors (``inbox``), whether the bot is still in a conversation (``presence``).
Participants' rights (opting out, retention, forgetting a person) have their own
package, memory/privacy/. All run through the door (memory/door.py); their public names
are re-exported by ``memory``."""
