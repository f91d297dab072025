"""Slash commands: answered at once by the router, before and instead of any LLM call."""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from clawbot.messages import InboundMessage
from clawbot.routing.sessions import Session


class SessionControl(Protocol):
    """The session operations a command may use. The router provides them; commands see
    only these, so this module never needs the router (which imports it)."""

    async def update_session(self, session: Session, **changes: Any) -> Session:
        """Persist ``changes`` to the freshest copy of ``session`` and return it."""
        ...

    async def status_text(self, session: Session) -> str:
        """The ``/status`` summary of ``session``: agent, model, size, tools."""
        ...


@dataclass
class CommandContext:
    """What a command handler may read or change."""

    sessions: SessionControl
    session: Session
    message: InboundMessage
    args: str
    private: bool = False
    """Set by a handler whose answer only the sender needs (a refusal): in a group it goes
    to them alone where the platform can."""

    async def update_session(self, **changes: Any) -> Session:
        self.session = await self.sessions.update_session(self.session, **changes)
        return self.session


Handler = Callable[[CommandContext], Awaitable[str]]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    handler: Handler
    aliases: tuple[str, ...] = ()
    usage: str = ""


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}
        self._by_alias: dict[str, Command] = {}

    def add(self, command: Command) -> None:
        for name in (command.name, *command.aliases):
            if name in self._by_alias:
                raise ValueError(f"/{name} is already registered")
            self._by_alias[name] = command
        self._commands[command.name] = command

    def command(
        self, name: str, summary: str, *, aliases: tuple[str, ...] = (), usage: str = ""
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.add(Command(name, summary, handler, aliases, usage))
            return handler

        return register

    def get(self, name: str) -> Command | None:
        return self._by_alias.get(name)

    def all(self) -> list[Command]:
        return sorted(self._commands.values(), key=lambda c: c.name)

    def suggest(self, name: str) -> list[str]:
        return difflib.get_close_matches(name, list(self._by_alias), n=3, cutoff=0.6)

    def help_text(self) -> str:
        lines = ["Commands:"]
        for command in self.all():
            names = " or ".join(f"/{n}" for n in (command.name, *command.aliases))
            usage = f" {command.usage}" if command.usage else ""
            lines.append(f"{names}{usage} — {command.summary}")
        lines.append("Anything else you type goes to the agent.")
        return "\n".join(lines)

    async def dispatch(self, name: str, context: CommandContext) -> str:
        command = self.get(name)
        if command is None:
            hint = self.suggest(name)
            did_you_mean = f" Did you mean {', '.join('/' + h for h in hint)}?" if hint else ""
            return f"Unknown command /{name}.{did_you_mean} Type /help to see the commands."
        return await command.handler(context)
