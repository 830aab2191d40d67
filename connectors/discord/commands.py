"""The ``/memory`` application command as discord.py declares it, and the interaction
it hands over turned back into the payload ``payloads.admin_command`` reads. Only the
declaration: the connector (connectors.discord.client) stores, defers and answers each
command, and the chat service decides who may do what.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import discord
from discord import app_commands

from connectors.discord import payloads


def interaction_payload(interaction: discord.Interaction[Any]) -> dict[str, Any]:
    """The INTERACTION_CREATE shape ``payloads.admin_command`` reads, from discord.py's
    Interaction (the tree hands us that, not the raw payload)."""
    user = interaction.user
    member: dict[str, Any] = {
        "user": {"id": str(user.id), "username": user.name, "global_name": user.global_name, "bot": user.bot},
        "nick": getattr(user, "nick", None),
        "permissions": str(interaction.permissions.value),
    }
    return {
        "id": str(interaction.id),
        "type": interaction.type.value,
        "token": interaction.token,
        "application_id": str(interaction.application_id),
        "guild_id": str(interaction.guild_id or ""),
        "channel_id": str(interaction.channel_id),
        "member": member,
        "data": dict(interaction.data or {}),
    }


Confirm = Literal["confirm"]  # an option whose one value reads as the text's "confirm"


class MemoryCommands(app_commands.Group):
    """``/memory about|why|forgotten|provenance|stats|forget-user|retention`` (admins) and
    ``privacy|forget-me|ignore-me|remember-me`` (anyone, about themselves): each
    subcommand hands its interaction to ``on_command``, whose options read as the
    command's text (``payloads.command_text``); the service decides who may do what."""

    def __init__(self, on_command: Callable[[discord.Interaction[Any]], Awaitable[None]]) -> None:
        super().__init__(
            name=payloads.COMMAND, description="This channel's memory: audit it, or decide about yours", guild_only=True
        )
        self._on_command = on_command

    @app_commands.command(description="What the bot keeps here and how to opt out or be forgotten")
    async def privacy(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="forget-me", description="Forget everything you wrote in this server (shows what first)")
    async def forget_me(self, interaction: discord.Interaction[Any], confirm: Confirm | None = None) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="ignore-me", description="Stop storing your new messages")
    async def ignore_me(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="remember-me", description="Store your new messages again")
    async def remember_me(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(name="forget-user", description="Forget everything someone wrote in this server (admins)")
    async def forget_user(
        self, interaction: discord.Interaction[Any], user: discord.User, confirm: Confirm | None = None
    ) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="How long this channel's messages are kept: 90d, or off (admins)")
    async def retention(self, interaction: discord.Interaction[Any], window: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="What memory holds about someone or something")
    async def about(self, interaction: discord.Interaction[Any], name: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="Why an answer said what it did")
    async def why(self, interaction: discord.Interaction[Any], answer: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="What was forgotten")
    async def forgotten(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="Which facts rest on a message")
    async def provenance(self, interaction: discord.Interaction[Any], message: str) -> None:
        await self._on_command(interaction)

    @app_commands.command(description="Totals of this channel's memory")
    async def stats(self, interaction: discord.Interaction[Any]) -> None:
        await self._on_command(interaction)
