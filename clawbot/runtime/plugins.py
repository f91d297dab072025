"""How a feature takes part in a turn without the runtime knowing it by name.

A feature (memory recall, subagent announces, approvals, a coordinator's scratchpad, and
next streaming, media, schedules, MCP) is a ``TurnPlugin`` handed to the runtime where the
bot is assembled (``clawbot.app``). It may contribute, each optional:

- tools, registered once at assembly (``tools``);
- ephemeral context blocks for one turn's model requests, never written to the transcript
  (``context``), and the history a request replays rewritten for that request alone
  (``history``), the way pydantic-ai composes history processors;
- hooks around a turn (``turn_started``, ``round_ended``, ``turn_ended``), a saved round a
  turn resumes from instead of asking the model again (``resume_round``), a wrapper around
  each model call (``around_model``) and around each tool call (``around_tool``), the way
  toolsets wrap a call;
- a word once the turn's reply reached the chat (``reply_sent``): what follows a reply
  (the reply read aloud), never what replaces it;
- lines of its own in a session's ``/status`` (``status``);
- a life of its own beside the bot's (``start`` when the bot is assembled, ``stop`` when it
  closes): a connection to keep, a loop to run.

The runtime asks only the plugins that override a hook, so a hook nobody uses costs a turn
nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from clawbot.messages import ToolCallBlock, ToolResultBlock, TranscriptEntry
from clawbot.routing.sessions import Session

if TYPE_CHECKING:
    from clawbot.agents.profiles import AgentSpec
    from clawbot.runtime.replies import ModelReply
    from clawbot.runtime.transcripts import Transcript
    from clawbot.security.paused_rounds import PausedRound
    from clawbot.tools.registry import Tool, ToolContext

log = logging.getLogger("clawbot.runtime")

ToolCallNext = Callable[[], Awaitable[ToolResultBlock]]
"""Runs the tool call (the next wrapper; innermost the tool itself, inside the gate)."""
ModelCallNext = Callable[[], Awaitable["ModelReply"]]
"""Makes the model call (the next wrapper; innermost the call, compacted when it must be)."""


class TurnStart(NamedTuple):
    """What a plugin may know of the turn it takes part in. A named tuple: one is built
    every turn, and a frozen dataclass would set each field through
    ``object.__setattr__`` (16,000 instructions against 8,000)."""

    session: Session
    agent: AgentSpec
    turn_id: str
    inputs: tuple[TranscriptEntry, ...]
    """The messages the turn answers (announces and merged backlog included)."""
    tool_names: frozenset[str]
    """The tools this turn may use."""
    transcript: Transcript
    tool_context: Callable[[], ToolContext]
    """The context the turn's tools run with, for a plugin that acts as one of them."""
    model: str = ""
    """The model the turn's requests go to."""

    def message(self) -> str:
        """The text of the user message this turn answers."""
        return self.transcript.user_text(self.turn_id)


class TurnPlugin:
    """A feature's part in a turn. Every hook does nothing unless overridden."""

    name = "plugin"

    def tools(self) -> Sequence[Tool]:
        """Tools this feature adds to the registry when the bot is assembled."""
        return ()

    async def start(self) -> None:
        """The bot is assembled: connect, start a loop (``stop`` ends what this began)."""

    async def stop(self) -> None:
        """The bot closes, after its turns ended or stopped."""

    async def context(self, turn: TurnStart) -> Sequence[str]:
        """Ephemeral blocks for this turn's model requests only (never persisted)."""
        return ()

    async def turn_started(self, turn: TurnStart) -> None:
        """Before the turn's first model call."""

    def history(self, turn: TurnStart, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The history one model request replays (OpenAI-format wire messages), rewritten
        for that request alone: called before every model call of the turn, so it must be
        quick (fetch what it needs in ``turn_started``). Return a new list, never change the
        messages in place: the transcript holds them."""
        return messages

    async def resume_round(self, turn: TurnStart) -> PausedRound | None:
        """A round saved by an earlier run of this turn, resumed without asking the model
        again (the first plugin that has one wins)."""
        return None

    async def round_ended(self, turn: TurnStart) -> None:
        """A tool round is durable in the transcript."""

    async def turn_ended(self, turn: TurnStart) -> None:
        """The turn ended, however it ended (done, failed, yielded, cancelled)."""

    async def reply_sent(self, session: Session, reply: str) -> None:
        """The turn's final reply reached ``session``'s chat. The session's next turn waits
        for this hook; a failure here is logged and changes nothing about the turn."""

    async def status(self, session: Session) -> Sequence[str]:
        """Lines this feature adds to ``session``'s ``/status`` (quick: a person waits)."""
        return ()

    async def around_model(self, turn: TurnStart, proceed: ModelCallNext) -> ModelReply:
        """Wraps one model call of the turn: return ``await proceed()``, or a reply of your
        own (a failure raised here ends the turn as a provider failure would)."""
        return await proceed()

    async def around_tool(
        self, call: ToolCallBlock, turn: TurnStart, proceed: ToolCallNext
    ) -> ToolResultBlock:
        """Wraps one tool call: return ``await proceed()`` to run it, or a result of your
        own instead."""
        return await proceed()

    def parked(self) -> set[asyncio.Task[Any]]:
        """Turns this feature holds waiting for a person: a shutdown stops them at once."""
        return set()


def _overrides(plugin: TurnPlugin, hook: str) -> bool:
    return getattr(type(plugin), hook) is not getattr(TurnPlugin, hook)


class TurnPlugins:
    """The plugins of one runtime, each hook bound once to the plugins that override it."""

    def __init__(self, plugins: Sequence[TurnPlugin] = ()) -> None:
        self.all = tuple(plugins)
        names = [p.name for p in self.all]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"turn plugins named twice: {', '.join(doubled)}")
        self._context = self._with("context")
        self._started = self._with("turn_started")
        self._history = self._with("history")
        self._resume = self._with("resume_round")
        self._round = self._with("round_ended")
        self._ended = self._with("turn_ended")
        self._replied = self._with("reply_sent")
        self._around = self._with("around_tool")
        self._model = self._with("around_model")
        self._status = self._with("status")
        self._start = self._with("start")
        self._stop = self._with("stop")
        self._parked = self._with("parked")

    def _with(self, hook: str) -> tuple[TurnPlugin, ...]:
        return tuple(p for p in self.all if _overrides(p, hook))

    def named(self, name: str) -> TurnPlugin | None:
        return next((p for p in self.all if p.name == name), None)

    async def context(self, turn: TurnStart) -> tuple[str, ...]:
        blocks: list[str] = []
        for plugin in self._context:
            blocks.extend(await plugin.context(turn))
        return tuple(blocks)

    async def turn_started(self, turn: TurnStart) -> None:
        for plugin in self._started:
            await plugin.turn_started(turn)

    def history(self, turn: TurnStart, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for plugin in self._history:
            messages = plugin.history(turn, messages)
        return messages

    async def resume_round(self, turn: TurnStart) -> PausedRound | None:
        for plugin in self._resume:
            saved = await plugin.resume_round(turn)
            if saved is not None:
                return saved
        return None

    async def round_ended(self, turn: TurnStart) -> None:
        for plugin in self._round:
            await plugin.round_ended(turn)

    async def turn_ended(self, turn: TurnStart) -> None:
        """Every plugin hears the end, even when an earlier one fails; the first failure
        is raised after all were told."""
        failure: BaseException | None = None
        for plugin in self._ended:
            try:
                await plugin.turn_ended(turn)
            except Exception as exc:  # told to the caller once every plugin heard the end
                failure = failure or exc
        if failure is not None:
            raise failure

    async def reply_sent(self, session: Session, reply: str) -> None:
        """Every plugin hears that the reply went out; a failure is logged, never raised:
        the reply is out and the turn is over."""
        for plugin in self._replied:
            try:
                await plugin.reply_sent(session, reply)
            except Exception:
                log.exception("plugin %s failed after the reply to %s", plugin.name, session.key)

    async def status(self, session: Session) -> list[str]:
        lines: list[str] = []
        for plugin in self._status:
            lines.extend(await plugin.status(session))
        return lines

    async def run_tool(
        self, call: ToolCallBlock, turn: TurnStart, innermost: ToolCallNext
    ) -> ToolResultBlock:
        """``innermost`` wrapped by every ``around_tool``, the first plugin outermost."""
        if not self._around:
            return await innermost()
        proceed = innermost
        for plugin in reversed(self._around):
            proceed = _wrapped(plugin, call, turn, proceed)
        return await proceed()

    async def start(self) -> None:
        for plugin in self._start:
            await plugin.start()

    async def stop(self) -> None:
        """Every plugin is stopped, last started first, even when one fails."""
        failure: BaseException | None = None
        for plugin in reversed(self._stop):
            try:
                await plugin.stop()
            except Exception as exc:  # raised once every plugin was stopped
                failure = failure or exc
        if failure is not None:
            raise failure

    async def call_model(self, turn: TurnStart, innermost: ModelCallNext) -> ModelReply:
        """``innermost`` wrapped by every ``around_model``, the first plugin outermost."""
        proceed = innermost
        for plugin in reversed(self._model):
            proceed = _wrapped_model(plugin, turn, proceed)
        return await proceed()

    def parked(self) -> set[asyncio.Task[Any]]:
        waiting: set[asyncio.Task[Any]] = set()
        for plugin in self._parked:
            waiting |= plugin.parked()
        return waiting


def _wrapped(
    plugin: TurnPlugin, call: ToolCallBlock, turn: TurnStart, proceed: ToolCallNext
) -> ToolCallNext:
    async def step() -> ToolResultBlock:
        return await plugin.around_tool(call, turn, proceed)

    return step


def _wrapped_model(plugin: TurnPlugin, turn: TurnStart, proceed: ModelCallNext) -> ModelCallNext:
    async def step() -> ModelReply:
        return await plugin.around_model(turn, proceed)

    return step
