"""Agent profiles: which model, prompt, tools, skills and context policy drive a session."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from clawbot.policies import ToolPolicy
from clawbot.settings.cost import BudgetPolicy

DEFAULT_AGENT_ID = "main"

HIGH_RISK_GROUPS = frozenset({"group:shell", "group:network", "group:sessions", "group:agents"})
"""Tool groups of the high-risk class: shell, network, session and agent administration.

Every agent but ``main`` is denied them unless its allow list names the tool itself; a
wildcard or a group name is not enough.
"""

SCRATCHPAD_GROUP = "group:scratchpad"
"""The scratchpad tools: an agent holds them only when it is a coordinator (``coordinator =
true``) and its allow list names them; a scratchpad belongs to a coordinator's session."""

MESSAGE_GROUP = "group:message"
"""The group of the subagent ``message`` tool: an agent holds it only when its profile sets
``subagents.message`` (its tool allow list does not grant it; its deny list can remove it)."""


SiblingAccess = Literal["read", "write"]
EVERY_SIBLING = "*"
_AGENT_ID = r"^[a-z0-9][a-z0-9_\-]{0,39}$"
_MODEL_REF = r"^[^/\s]+/\S+$"
ModelRef = Annotated[str, StringConstraints(pattern=_MODEL_REF)]


class SubagentPolicy(BaseModel):
    """Which agents an agent may spawn as subagents: ids or ``*`` wildcards. ``None`` (the
    default) means any agent for ``main`` and only itself for every other agent.

    ``message``: whether the agent, run as a subagent, may post to the person's chat of its
    root session (the ``message`` tool). Off by default: a subagent reaches no platform."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: tuple[str, ...] | None = None
    message: bool = False


class ContextPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_recall: bool = False
    max_history_messages: int | None = Field(default=None, ge=2)
    recall_from: tuple[str, ...] = ()
    """Other agents whose memories this one recalls and searches, besides its own (``*``:
    every agent's)."""
    recall_items: int = Field(default=5, ge=1, le=50)
    """At most this many memories in a turn's ``[Context: memory]`` block."""
    recall_chars: int = Field(default=2000, ge=100, le=50_000)
    """At most this many characters of memory text in that block."""
    recall_tags: tuple[str, ...] = ()
    """When set, only memories with one of these tags are recalled into the block."""


class AgentSpec(BaseModel):
    """An agent profile. Stored as data; switching a session's agent switches its profile."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str = Field(pattern=_AGENT_ID)
    name: str = Field(min_length=1, max_length=60)
    description: str = ""
    model: str | None = Field(default=None, pattern=_MODEL_REF)
    fallback_models: tuple[ModelRef, ...] | None = None
    """Models this agent's calls move to, in order, when its model is down (see
    ``clawbot.runtime.fallbacks``); None: the global ``CLAWBOT_FALLBACK_MODELS``, ``[]``:
    none at all."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    system_prompt: str | None = None
    tools: ToolPolicy = ToolPolicy()
    skills: ToolPolicy = ToolPolicy()
    context: ContextPolicy = ContextPolicy()
    subagents: SubagentPolicy = SubagentPolicy()
    workspace_overlay: bool = True
    risk_profile: str = "default"
    as_tool: bool = False
    """Other agents may call this one as the tool ``agent_<agent_id>(task)``, described by
    ``description``: it runs as their delegate and its answer is the tool result."""
    siblings: dict[str, SiblingAccess] = Field(default_factory=dict)
    """Other agents' folders (``agents/<id>/`` in the workspace) this agent's file tools and
    shell may use besides its own: ``read``, or ``write`` (with a tool that writes); ``*``
    for every agent's folder. See ``clawbot.security.reach``."""
    heartbeat_interval: float | None = Field(default=None, ge=0)
    """Seconds between runs of this agent's ``HEARTBEAT.md`` checklist (0: none); unset,
    the ``heartbeat_interval`` setting applies (docs/schedules.md)."""
    budget: BudgetPolicy = BudgetPolicy()
    """What this agent's calls may spend per UTC day, per session and per turn (``[budget]``:
    ``per_day = "$2"``, ``per_turn = "50k tokens"``), besides the settings' budgets."""
    coordinator: bool = False
    """Coordinator mode: its workers' reports reach its model as ``<task-notification>``
    XML, it may hold the scratchpad tools, and the workers it spawns keep their own tools
    (within what its session may reach) though it holds none of them itself."""

    @field_validator("name")
    @classmethod
    def _trimmed(cls, value: str) -> str:
        if value != value.strip():
            raise ValueError("must not start or end with spaces")
        return value

    @field_validator("siblings")
    @classmethod
    def _sibling_ids(cls, value: dict[str, SiblingAccess]) -> dict[str, SiblingAccess]:
        for agent_id in value:
            if agent_id != EVERY_SIBLING and not re.fullmatch(_AGENT_ID, agent_id):
                raise ValueError(
                    f"{agent_id!r} is not an agent id (1-40 lowercase letters, digits, '-' "
                    "or '_', starting with a letter or digit; or '*' for every agent)"
                )
        return value

    @property
    def label(self) -> str:
        """``name (id)``, or just the id when they are the same."""
        return self.agent_id if self.name == self.agent_id else f"{self.name} ({self.agent_id})"

    def allows_tool(self, name: str, groups: Iterable[str] = ()) -> bool:
        """The tool policy, plus the default denial of high-risk tools outside ``main``."""
        groups = tuple(groups)
        if MESSAGE_GROUP in groups:
            return self.subagents.message and not self.tools.denies(name, groups)
        if SCRATCHPAD_GROUP in groups and not self.coordinator:
            return False
        if not self.tools.permits(name, groups):
            return False
        if self.agent_id != DEFAULT_AGENT_ID and HIGH_RISK_GROUPS.intersection(groups):
            return name in self.tools.allow
        return True

    def may_spawn(self, agent_id: str) -> bool:
        """Whether this agent may spawn ``agent_id`` as a subagent (``subagents.allow``)."""
        allow = self.subagents.allow
        if allow is None:
            return self.agent_id == DEFAULT_AGENT_ID or agent_id == self.agent_id
        return any(fnmatch.fnmatchcase(agent_id, pattern) for pattern in allow)

    def allows_skill(self, name: str) -> bool:
        return self.skills.permits(name)


DEFAULT_AGENT = AgentSpec(
    agent_id=DEFAULT_AGENT_ID,
    name="main",
    description="The default general-purpose assistant.",
)

AgentSource = Literal["builtin", "file", "chat"]


@dataclass(frozen=True)
class AgentRecord:
    """A stored AgentSpec with where its current version came from.

    ``file_hash`` is the hash of the ``agents/<id>.toml`` content last applied, so a file
    updates the registry only when it was edited since; changes made from chat survive a
    restart until then.
    """

    spec: AgentSpec
    source: AgentSource
    file_hash: str | None = None


ModelSource = Literal["session override", "agent default", "global default"]


def fallback_chain(model: str, agent: AgentSpec, default: Sequence[str]) -> tuple[str, ...]:
    """The models a call moves to when ``model`` is down: the agent's list, else the
    global default, without ``model`` itself or repeats."""
    listed = agent.fallback_models if agent.fallback_models is not None else default
    return tuple(m for m in dict.fromkeys(listed) if m != model)


def effective_model(
    override: str | None, agent: AgentSpec, default: str
) -> tuple[str, ModelSource]:
    """The model a turn uses and where it came from: session > agent > global."""
    if override:
        return override, "session override"
    if agent.model:
        return agent.model, "agent default"
    return default, "global default"


_PATTERN_HINTS = {
    "agent_id": "use 1-40 lowercase letters, digits, '-' or '_', starting with a letter or digit",
    "model": "write it as provider/model, e.g. openai/gpt-4o-mini",
}


def spec_problems(exc: ValidationError) -> list[tuple[tuple[str, ...], str, str]]:
    """(location, error type, readable message) for each problem of an AgentSpec."""
    problems = []
    for error in exc.errors():
        loc = tuple(str(part) for part in error["loc"])
        kind = error["type"]
        message = str(error["msg"])
        if kind == "extra_forbidden":
            message = "not an agent setting (" + ", ".join(AgentSpec.model_fields) + ")"
        elif kind == "string_pattern_mismatch" and loc and loc[-1] in _PATTERN_HINTS:
            message = _PATTERN_HINTS[loc[-1]]
        elif kind == "string_pattern_mismatch" and loc and loc[0] == "fallback_models":
            message = _PATTERN_HINTS["model"]
        problems.append((loc, kind, message))
    return problems
