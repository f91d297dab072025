"""One MCP server's connection, kept alive: started, its tools listed, watched, and started
again with a growing wait when it fails or dies.

The server's tools exist only while it is connected (``McpConnection.tools``); whoever
listens to ``on_change`` (``clawbot.mcp.plugin``) puts them in the registry and takes them
out. A call is bounded by the server's timeout, so a server that hangs never hangs a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import ClientSession, McpError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from clawbot.mcp.tools import McpSchemaError, McpToolError, mcp_tool, result_text
from clawbot.redaction import redactor
from clawbot.settings.mcp import McpServer
from clawbot.tools.registry import Tool

log = logging.getLogger("clawbot.mcp")

ServerState = Literal["connecting", "connected", "failed", "stopped"]
MAX_ERROR = 300


@dataclass(frozen=True)
class ServerStatus:
    """What ``clawbot mcp list``, ``clawbot doctor`` and the logs say of one server."""

    name: str
    transport: str
    """``stdio: COMMAND`` or ``http: URL`` (never its env or headers)."""
    state: ServerState = "connecting"
    tools: tuple[str, ...] = ()
    """The clawbot names of the tools offered while connected."""
    skipped: tuple[str, ...] = ()
    """Tools the server listed that are not offered, each with why."""
    error: str = ""
    """Why the last connection failed or ended (secrets masked)."""
    failures: int = 0
    """Failed or ended connections in a row."""


@dataclass(frozen=True)
class Timing:
    """How long a server may take to start, and how reconnections are spaced."""

    connect: float = 30.0
    backoff: float = 1.0
    backoff_max: float = 300.0
    ping_interval: float = 30.0

    def wait_after(self, failures: int) -> float:
        return min(self.backoff * 2.0 ** max(failures - 1, 0), self.backoff_max)


@dataclass
class _Live:
    """An open session and what ends it."""

    session: ClientSession
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the server's stream closed (its process exited, say)."""
    suspect: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a call failed in a way a dead server would: ping it now."""
    relist: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the server said its tools changed."""
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the session ends, however: a call still waiting ends with it."""


class McpServerDied(Exception):
    """The connection ended, or the server stopped answering."""


class McpConnection:
    def __init__(
        self,
        name: str,
        config: McpServer,
        *,
        timing: Timing,
        stderr: Path | None = None,
        on_change: Callable[[McpConnection], object] = lambda connection: None,
    ) -> None:
        self.name = name
        self.config = config
        self.timing = timing
        self.stderr = stderr
        self.on_change = on_change
        transport = f"stdio: {config.command}" if config.command else f"http: {config.url}"
        self.status = ServerStatus(name=name, transport=transport)
        self.tools: tuple[Tool, ...] = ()
        self.first_attempt = asyncio.Event()
        """Set once the first connection succeeded or failed (``start`` waits for it)."""
        self._live: _Live | None = None

    def __repr__(self) -> str:
        return f"McpConnection({self.name!r}, {self.status.state})"

    async def run(self) -> None:
        """Connect, serve until the server dies, wait, again: until cancelled. A failure
        is logged once per outage (the attempts after it quietly), and so is the return."""
        while True:
            try:
                await self._serve()
                problem = "the server closed the connection"
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                problem = describe(exc)
            was_connected = self.status.state == "connected"
            failures = 1 if was_connected else self.status.failures + 1
            self._live = None
            self._set(state="failed", tools=(), error=problem, failures=failures)
            wait = self.timing.wait_after(failures)
            if failures == 1:
                verb = "died" if was_connected else "failed to start"
                log.warning(
                    "MCP server %s %s: %s; its tools are withdrawn, retrying in %g s "
                    "(then with a growing wait)",
                    self.name,
                    verb,
                    problem,
                    wait,
                )
            else:
                log.debug("MCP server %s still failing: %s", self.name, problem)
            self.first_attempt.set()
            await asyncio.sleep(wait)

    async def probe(self) -> ServerStatus:
        """One connection: the tools listed, then closed (``clawbot mcp list``, doctor)."""
        try:
            async with self._opened():
                pass
        except Exception as exc:
            self._set(state="failed", tools=(), error=describe(exc), failures=1)
        return self.status

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call the server's ``tool``; every failure is a McpToolError (an error result)."""
        live = self._live
        if live is None:
            raise McpToolError(
                f"MCP server {self.name} is not connected ({self.status.error or 'starting'})",
                hint="it is being reconnected; try again later or do without it",
            )
        timeout = self.config.timeout
        request = asyncio.ensure_future(live.session.call_tool(tool, arguments))
        closed = asyncio.ensure_future(live.closed.wait())
        try:
            await asyncio.wait((request, closed), timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            closed.cancel()
            if not request.done():
                request.cancel()  # given up, or the turn was stopped: the call goes too
        if not request.done() and live.closed.is_set():
            raise McpToolError(
                f"MCP server {self.name} closed the connection during the call",
                hint="it is being restarted; try again later",
            )
        if not request.done():
            live.suspect.set()
            raise McpToolError(
                f"{tool} on MCP server {self.name} gave no answer in {timeout:g} s",
                hint="it was given up; try again or do without it",
            )
        try:
            result = request.result()
        except McpError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                raise McpToolError(
                    f"MCP server {self.name} closed the connection during the call",
                    hint="it is being restarted; try again later",
                ) from None
            raise McpToolError(f"MCP server {self.name}: {_clip(exc.error.message)}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError, httpx.HTTPError):
            live.suspect.set()
            raise McpToolError(
                f"MCP server {self.name} could not be reached during the call",
                hint="it is being checked and reconnected; try again later",
            ) from None
        return result_text(result)

    async def _serve(self) -> None:
        async with self._opened() as live:
            self._live = live
            log.info("MCP server %s connected: %d tools", self.name, len(self.tools))
            self.first_attempt.set()
            while True:
                await self._watch(live)
                listed = await self._list(live.session)
                self._set(**self._made(listed))

    async def _watch(self, live: _Live) -> None:
        """Return when the server says its tools changed; raise when it died."""
        while not live.relist.is_set():
            waits = [asyncio.ensure_future(e.wait()) for e in (live.ended, live.suspect)]
            waits.append(asyncio.ensure_future(live.relist.wait()))
            try:
                await asyncio.wait(
                    waits, timeout=self.timing.ping_interval, return_when="FIRST_COMPLETED"
                )
            finally:
                for waiting in waits:
                    waiting.cancel()
            if live.ended.is_set():
                raise McpServerDied("the server closed the connection")
            if live.relist.is_set():
                break
            live.suspect.clear()
            try:
                async with asyncio.timeout(self.timing.connect):
                    await live.session.send_ping()
            except Exception:
                raise McpServerDied("the server stopped answering") from None
        live.relist.clear()

    @contextlib.asynccontextmanager
    async def _opened(self) -> AsyncIterator[_Live]:
        """A session with the server, initialized and its tools listed."""
        self._set(state="connecting")
        with self._stderr() as errlog:
            async with self._transport(errlog) as (read, write):
                watched, ended = _watched(read)
                relist = asyncio.Event()

                async def notified(message: Any) -> None:
                    if isinstance(message, types.ServerNotification) and isinstance(
                        message.root, types.ToolListChangedNotification
                    ):
                        relist.set()

                async with ClientSession(watched, write, message_handler=notified) as session:
                    async with asyncio.timeout(self.timing.connect):
                        await session.initialize()
                        listed = await self._list(session)
                    self._set(state="connected", error="", failures=0, **self._made(listed))
                    live = _Live(session=session, ended=ended, relist=relist)
                    try:
                        yield live
                    finally:
                        live.closed.set()

    @contextlib.asynccontextmanager
    async def _transport(
        self, errlog: TextIO
    ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception], Any]]:
        config = self.config
        if config.command is not None:
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env={k: v.get_secret_value() for k, v in config.env.items()},
            )
            async with stdio_client(params, errlog=errlog) as (read, write):
                yield read, write
            return
        assert config.url is not None
        headers = {k: v.get_secret_value() for k, v in config.headers.items()}
        timeout = httpx.Timeout(self.timing.connect, read=None)
        async with (
            httpx.AsyncClient(headers=headers, timeout=timeout) as http,
            streamable_http_client(config.url, http_client=http) as (read, write, _),
        ):
            yield read, write

    @contextlib.contextmanager
    def _stderr(self) -> Any:
        """Where a stdio server's own error output goes: its log file, or nowhere."""
        if self.stderr is None or self.config.command is None:
            with open(os.devnull, "w") as sink:
                yield sink
            return
        self.stderr.parent.mkdir(parents=True, exist_ok=True)
        with self.stderr.open("a", encoding="utf-8") as sink:
            yield sink

    async def _list(self, session: ClientSession) -> list[types.Tool]:
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            listed.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                return listed

    def _made(self, listed: list[types.Tool]) -> dict[str, Any]:
        """The clawbot tools of ``listed`` that may be offered, and those skipped (once
        each with a warning: a malformed schema, a name taken by another of its tools)."""
        enabled = self.config.enabled_tools
        tools: dict[str, Tool] = {}
        owners: dict[str, str] = {}
        skipped: list[str] = []
        for item in listed:
            if enabled is not None and item.name not in enabled:
                continue
            try:
                made = mcp_tool(self.name, self.config, item, self.call)
            except McpSchemaError as exc:
                skipped.append(f"{item.name}: {exc.message}")
                continue
            if made.name in tools:
                skipped.append(
                    f"{item.name}: its name {made.name} is also that of its tool "
                    f"{owners[made.name]!r}"
                )
                continue
            tools[made.name] = made
            owners[made.name] = item.name
        if enabled is not None:
            offered = {item.name for item in listed}
            skipped += [
                f"{n}: named in enabled_tools, not offered by the server"
                for n in enabled
                if n not in offered
            ]
        for line in skipped:
            if line not in self.status.skipped:
                log.warning("MCP server %s: tool %s; it is skipped", self.name, line)
        self.tools = tuple(tools.values())
        return {"tools": tuple(tools), "skipped": tuple(skipped)}

    def _set(self, **changes: Any) -> None:
        if "tools" in changes and not changes["tools"]:
            self.tools = ()
        self.status = replace(self.status, **changes)
        self.on_change(self)


def _watched(
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
) -> tuple[MemoryObjectReceiveStream[SessionMessage | Exception], asyncio.Event]:
    """``read`` passed on through a stream of our own, and an event set when it ends: the
    SDK's session ends quietly when its server's process exits; this says so."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    ended = asyncio.Event()

    async def forward() -> None:
        try:
            async with send:
                async for item in read:
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # our side closed first: the session is being shut down
        finally:
            ended.set()

    task = asyncio.ensure_future(forward())
    _FORWARDERS.add(task)
    task.add_done_callback(_FORWARDERS.discard)
    return receive, ended


_FORWARDERS: set[asyncio.Future[None]] = set()
"""Running forwarders, held so they are not collected mid-run."""


def describe(exc: BaseException) -> str:
    """One line for a failure, secrets masked: an exception group's first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, McpError):
        return _clip(exc.error.message)
    text = str(exc) or type(exc).__name__
    if isinstance(exc, FileNotFoundError | PermissionError):
        text = f"cannot run its command: {text}"
    return _clip(redactor.redact(text))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 1] + "…"
