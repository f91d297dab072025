"""MCP servers as a turn plug-in: ``start`` connects every ``[mcp_servers.NAME]`` server and
keeps it connected, ``stop`` closes them; each server's tools are in the tool registry while
it is connected, and only then (the registry tells the runtime, so what agents are offered
follows). A tool whose name is taken is refused, naming both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from clawbot.mcp.connection import McpConnection, ServerStatus, Timing
from clawbot.runtime.plugins import TurnPlugin
from clawbot.settings import Settings
from clawbot.tools.registry import ToolRegistry

log = logging.getLogger("clawbot.mcp")


def timing_of(settings: Settings) -> Timing:
    return Timing(
        connect=settings.mcp_connect_timeout,
        backoff=settings.mcp_backoff,
        backoff_max=settings.mcp_backoff_max,
        ping_interval=settings.mcp_ping_interval,
    )


def connections(settings: Settings) -> list[McpConnection]:
    """One connection per configured server (not yet started)."""
    return [
        McpConnection(
            name,
            config,
            timing=timing_of(settings),
            stderr=settings.home / "logs" / f"mcp-{name}.log",
        )
        for name, config in settings.mcp_servers.items()
    ]


async def probe(settings: Settings) -> list[ServerStatus]:
    """Every configured server connected once, its tools listed, then closed: what ``clawbot
    mcp list`` and ``clawbot doctor`` show (beside a running bot too)."""
    return list(await asyncio.gather(*(c.probe() for c in connections(settings))))


class McpServers(TurnPlugin):
    name = "mcp"

    def __init__(self, settings: Settings, registry: ToolRegistry) -> None:
        self.registry = registry
        self.connections = connections(settings)
        for connection in self.connections:
            connection.on_change = self._sync
        self._tasks: list[asyncio.Task[None]] = []
        self._mine: dict[str, str] = {}
        """Tool name -> the server whose tool it is, for those in the registry now."""
        self._refused: set[tuple[str, str]] = set()
        self._changed = asyncio.Event()
        """Set (and replaced) at every change of a server's state."""

    def statuses(self) -> list[ServerStatus]:
        return [c.status for c in self.connections]

    async def start(self) -> None:
        """Connect every server; return once each is connected or failed its first try
        (a failed one goes on trying in the background)."""
        for connection in self.connections:
            self._tasks.append(asyncio.create_task(connection.run(), name=f"mcp:{connection.name}"))
        await asyncio.gather(*(c.first_attempt.wait() for c in self.connections))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for connection in self.connections:
            connection.tools = ()
            self._sync(connection)

    async def until(
        self, server: str, state: str, check: Callable[[ServerStatus], bool] = lambda s: True
    ) -> ServerStatus:
        """Wait until ``server`` is in ``state`` and passes ``check`` (for tests and the
        console): no timer, the connection's changes wake it."""
        while not (self._status(server).state == state and check(self._status(server))):
            await self._changed.wait()
        return self._status(server)

    def _status(self, server: str) -> ServerStatus:
        return next(c.status for c in self.connections if c.name == server)

    def _sync(self, connection: McpConnection) -> None:
        """The registry holds exactly the connected servers' tools."""
        wanted = {tool.name: tool for tool in connection.tools}
        for name, server in list(self._mine.items()):
            if server == connection.name and name not in wanted:
                self.registry.remove(name)
                del self._mine[name]
        for name, tool in wanted.items():
            if self._mine.get(name) == connection.name:
                continue
            if self.registry.get(name) is not None:
                owner = self._mine.get(name)
                taken = f"server {owner}'s tool" if owner else "a built-in or plug-in tool"
                if (connection.name, name) not in self._refused:
                    self._refused.add((connection.name, name))
                    log.error(
                        "MCP server %s's tool %s is refused: %s has that name already; "
                        "rename one or leave it out of enabled_tools",
                        connection.name,
                        name,
                        taken,
                    )
                continue
            self.registry.add(tool)
            self._mine[name] = connection.name
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def refused(self) -> Sequence[tuple[str, str]]:
        """(server, tool name) pairs refused because the name was taken."""
        return sorted(self._refused)
