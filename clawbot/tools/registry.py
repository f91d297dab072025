"""Tools: typed async functions whose JSON schema is derived from their signature.

A parameter annotated with :class:`ToolContext` receives the turn's context and is left out of
the schema. Arguments from the model are validated against the schema before the call; a
failure of any kind becomes an error result for the model, never the end of the turn.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from clawbot.agents.profiles import HIGH_RISK_GROUPS
from clawbot.errors import ClawbotError, ToolArgumentsError
from clawbot.messages import ToolCallBlock, ToolResultBlock, TranscriptEntry
from clawbot.policies import Risk
from clawbot.security.reach import ReachSource, whole_workspace

if TYPE_CHECKING:
    from clawbot.agents.switchboard import Switchboard
    from clawbot.routing.sessions import Session
    from clawbot.settings import Settings

log = logging.getLogger("clawbot.tools")

ToolPrecheck = Callable[[Any, "ToolContext"], Awaitable[None]]
"""A tool's check of a call's validated arguments (its arguments model) in its context."""
MAX_RESULT_CHARS = 50_000
MAX_ERROR_CHARS = 300
"""An unexpected tool failure is logged and returned in at most this many characters."""


class ListedSkill(Protocol):
    """What a tool may read of a skill listed to the agent (a ``clawbot.agents.skills.Skill``,
    known to the context by this shape only)."""

    @property
    def name(self) -> str: ...

    @property
    def body(self) -> str: ...


@dataclass
class ToolContext:
    """What a running tool may know about its turn."""

    session: Session
    workspace: Path
    settings: Settings
    agent_id: str = "main"
    extras: dict[str, Any] = field(default_factory=dict)
    skills: tuple[ListedSkill, ...] = ()
    """The skills listed to the active agent this turn (what ``skill_read`` may open)."""
    switchboard: Switchboard | None = None
    """How session and agent tools change the session or the agent registry."""
    turn_id: str | None = None
    inputs: tuple[TranscriptEntry, ...] = ()
    """The messages the turn answers (what an injected one carries: its hop and trace)."""
    reach: ReachSource = whole_workspace
    """The session's workspace reach, asked at each file tool call (a subagent's is within
    its parent's, as the parent's policy stands at that moment)."""
    withheld_skills: tuple[str, ...] = ()
    """Skills the active agent allows that this session may not use (its parent lacks them)."""


ToolFunction = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Tool:
    """One executable function with its JSON-schema contract and risk level."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: ToolFunction
    arguments_model: type[BaseModel]
    context_param: str | None = None
    risk: Risk = "safe"
    groups: tuple[str, ...] = ()
    refusal: str = ""
    """Said when a call from an agent that lacks the tool is refused: how one gets it."""
    precheck: ToolPrecheck | None = None
    """What a call must pass before anyone is asked to approve it (its paths within the
    session's reach, say): raise a ClawbotError to refuse it without asking."""
    approval_note: str = ""
    """What a person asked to approve a call should know beyond its arguments (what an
    unsandboxed command reaches): a line of the approval request."""

    @property
    def high_risk(self) -> bool:
        """Shell, network, session or agent administration: see ``AgentSpec.allows_tool``."""
        return not HIGH_RISK_GROUPS.isdisjoint(self.groups)

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style tool definition litellm sends to every provider."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def make_tool(
    function: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    risk: Risk = "safe",
    groups: Iterable[str] = (),
    refusal: str = "",
    precheck: ToolPrecheck | None = None,
    approval_note: str = "",
) -> Tool:
    """Build a Tool from an async function's signature, annotations and docstring."""
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"tool {function.__name__} must be an async function")
    hints = get_type_hints(function, include_extras=True)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(function).parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model = create_model(
        f"{function.__name__}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    doc = inspect.getdoc(function) or ""
    return Tool(
        name=name or function.__name__,
        description=description or doc.split("\n\n")[0].replace("\n", " "),
        parameters=schema,
        function=function,
        arguments_model=model,
        context_param=context_param,
        risk=risk,
        groups=tuple(groups),
        refusal=refusal,
        precheck=precheck,
        approval_note=approval_note,
    )


class ToolRegistry:
    """All tools known to the process; agents see a filtered view of it. Tools may come
    and go while the bot runs (an MCP server's, as it connects and dies): ``listeners``
    hear every change, so what agents are offered follows the registry."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self.listeners: list[Callable[[], object]] = []
        for item in tools:
            self.add(item)

    def add(self, item: Tool) -> Tool:
        if item.name in self._tools:
            raise ValueError(f"a tool named {item.name!r} is already registered")
        self._tools[item.name] = item
        self._changed()
        return item

    def _changed(self) -> None:
        for listener in self.listeners:
            listener()

    def tool(
        self, *, name: str | None = None, risk: Risk = "safe", groups: Iterable[str] = ()
    ) -> Callable[[ToolFunction], ToolFunction]:
        """Decorator registering an async function as a tool."""

        def register(function: ToolFunction) -> ToolFunction:
            self.add(make_tool(function, name=name, risk=risk, groups=groups))
            return function

        return register

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def remove(self, name: str) -> None:
        """Forget a tool (an agent no longer offered as a tool); unknown names are fine."""
        if self._tools.pop(name, None) is not None:
            self._changed()

    def approval_note(self, name: str) -> str:
        """The tool's ``approval_note`` ("" for an unknown tool)."""
        item = self._tools.get(name)
        return item.approval_note if item is not None else ""

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    async def refusal(
        self, call: ToolCallBlock, context: ToolContext, allowed: Collection[str] | None = None
    ) -> ToolResultBlock | None:
        """The error ``call`` would end in before doing anything (the tool not available,
        its arguments invalid, its precheck failing), or None: asked before a person is
        asked to approve the call, so nobody approves a call that cannot run."""
        checked = self._checked(call, allowed)
        if isinstance(checked, ToolResultBlock):
            return checked
        item, arguments = checked
        if item.precheck is not None:
            try:
                await item.precheck(arguments, context)
            except ClawbotError as exc:
                return _error(call, str(exc))
        return None

    def _checked(
        self, call: ToolCallBlock, allowed: Collection[str] | None
    ) -> tuple[Tool, BaseModel] | ToolResultBlock:
        """The tool and its validated arguments, or the error result that refuses them."""
        item = self._tools.get(call.name)
        if item is None or (allowed is not None and call.name not in allowed):
            why = f": {item.refusal}" if item is not None and item.refusal else ""
            return _error(call, f"tool {call.name!r} is not available to this agent{why}")
        if "__invalid_json__" in call.arguments:
            return _error(
                call,
                f"the arguments were not valid JSON: {call.arguments['__invalid_json__'][:200]}",
            )
        try:
            return item, item.arguments_model.model_validate(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return _error(call, str(ToolArgumentsError(f"invalid arguments: {problems}")))

    async def execute(
        self, call: ToolCallBlock, context: ToolContext, allowed: Collection[str] | None = None
    ) -> ToolResultBlock:
        """Run one tool call; every failure becomes an error result for the model."""
        checked = self._checked(call, allowed)
        if isinstance(checked, ToolResultBlock):
            return checked
        item, arguments = checked
        kwargs = {key: getattr(arguments, key) for key in type(arguments).model_fields}
        if item.context_param:
            kwargs[item.context_param] = context
        try:
            result = await item.function(**kwargs)
        except ClawbotError as exc:
            return _error(call, str(exc))
        except Exception as exc:
            # An exception's text can repeat a huge argument: keep the log line and the
            # result short.
            problem = _clipped(f"{type(exc).__name__}: {exc}")
            log.warning("tool %s failed: %s", call.name, problem)
            return _error(call, problem)
        return ToolResultBlock(tool_call_id=call.id, name=call.name, content=_as_text(result))


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        text = result
    elif isinstance(result, BaseModel):
        text = result.model_dump_json()
    else:
        text = json.dumps(result, default=str, ensure_ascii=False)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[truncated: {len(text)} characters in all]"
    return text


def _clipped(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error(call: ToolCallBlock, message: str) -> ToolResultBlock:
    return ToolResultBlock(
        tool_call_id=call.id, name=call.name, content=f"error: {message}", is_error=True
    )
