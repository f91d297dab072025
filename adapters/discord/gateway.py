"""discord.py's gateway as the adapter uses it: only the intents it reads, and parsers that
skip a dispatch they cannot parse instead of ending the connection."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import discord

log = logging.getLogger(__name__)


def intents() -> discord.Intents:
    """Only what the adapter reads; message_content is privileged (see the module docstring)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


def guard_parsers(client: discord.Client) -> None:
    """Make a gateway dispatch the library cannot parse a logged skip, not a dead connection.

    discord.py has no hook for this: a KeyError in one of its parsers (say a MESSAGE_CREATE
    without ``content``) escapes ``Client.connect`` and ends the receive loop. So this wraps
    the entries of the state's parser table, a library internal.
    """
    parsers: dict[str, Callable[[Any], None]] = client._connection.parsers

    def guarded(event: str, parse: Callable[[Any], None]) -> Callable[[Any], None]:
        def run(data: Any) -> None:
            try:
                parse(data)
            except Exception as exc:
                log.warning(
                    "discord: skipped a malformed %s update (%s)", event, type(exc).__name__
                )

        return run

    for event, parse in list(parsers.items()):
        if event not in ("READY", "RESUMED"):
            parsers[event] = guarded(event, parse)
