"""Participants' rights: what the people in a conversation may decide about what the bot
remembers of them, in one place so that each promise can be read and checked here.

Stashbird honours:

- Not being remembered: a person opts out of a workspace (``set_optout``,
  ``optout_status``: commands.py); their new messages are acknowledged and not stored,
  on every path (``memory.ingest`` checks through the cache of optouts.py), and an edit
  of theirs deletes the message instead (memory/forgetting/deletion.py).
- Being forgotten: everything one person wrote in a workspace or the whole store, and
  what rested only on it, goes; facts others' messages support stay, re-worded from
  those (``forget_author``: commands.py; the work: person.py, through the batched
  Algorithm 1 of memory/forgetting/batch.py).
- Retention: a conversation's window, or the store's default, after which its messages
  are forgotten the same way (the pure rules: retention.py; ``set_retention``,
  ``retention``, ``apply_retention``, ``watch_retention_default``: commands.py).

A single message deleted or edited on the platform takes what was derived from it along
(memory/forgetting/, reached through ``memory.forget`` and ``memory.edit``). Who may ask
for what (a person for themselves: the ``OWN`` grant) is the access table's to say
(memory/access.py).

Outside the core, where people ask: the chat's ``/memory`` subcommands ``privacy``,
``forget-me``, ``ignore-me``, ``remember-me``, ``forget-user`` and ``retention``
(connectors/admin.py; Discord's slash commands in connectors/discord/commands.py); a
member leaving, forgotten when STASHBIRD_ON_MEMBER_LEAVE says so (connectors/service.py);
the operator's ``stashbird optout``, ``forget --author`` and ``retention``
(bot/commands/); the scheduler's retention job (jobs/work.py).
"""
