"""The tools that run another agent synchronously: ``delegate(role, task, tools?)`` and, for
each agent whose profile sets ``as_tool``, ``agent_<agent_id>(task)``. Both are in the
high-risk ``group:sessions`` (``main`` has them; another agent only when its allow list
names them) and in ``group:delegation``, which no delegate is ever given."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from clawbot.agents.profiles import AgentSpec
from clawbot.agents.registry import AgentRegistry
from clawbot.errors import SubagentError
from clawbot.subagents.delegation import (
    DELEGATE_TOOL,
    DELEGATION_GROUP,
    SESSIONS_GROUP,
    DelegateAnswer,
    Delegation,
)
from clawbot.subagents.injection import TurnOrigin
from clawbot.tools.registry import Tool, ToolContext, ToolRegistry, make_tool

log = logging.getLogger("clawbot.subagents")

GROUPS = (SESSIONS_GROUP, DELEGATION_GROUP)
AGENT_TOOL_PREFIX = "agent_"
MAX_TASKS = 20


def _origin(ctx: ToolContext) -> TurnOrigin:
    return TurnOrigin.of(ctx.session, ctx.turn_id, ctx.inputs)


def _combined(answers: list[DelegateAnswer]) -> str:
    parts = []
    for number, answer in enumerate(answers, start=1):
        head = f"## Task {number}: {answer.status}"
        body = answer.text if answer.ok else f"error: {answer.text}"
        parts.append(f"{head}\n{body}")
    return "\n\n".join(parts)


def delegate_tool(delegation: Delegation) -> Tool:
    """The ``delegate`` tool, bound to one bot's delegation."""

    async def delegate(
        role: Annotated[
            str,
            Field(
                description="the specialist, e.g. 'researcher'; an agent's id or name runs "
                "that agent"
            ),
        ],
        task: Annotated[
            str | list[str],
            Field(
                description="what to do, self-contained; a list of independent tasks runs "
                "them in parallel, one delegate each"
            ),
        ],
        ctx: ToolContext,
        tools: Annotated[
            list[str] | None,
            Field(description="the tools the delegate may use (yours only); default: all"),
        ] = None,
    ) -> str:
        """Hand a task to a specialist that works on it now and answers: its answer is this
        tool's result. It starts with no memory of this conversation, so say all it needs."""
        plan = delegation.plan(ctx.session, role, tools)
        if isinstance(task, str):
            answer = await delegation.run(ctx.session, _origin(ctx), plan, task)
            if not answer.ok:
                raise SubagentError(answer.text)
            return answer.text
        if len(task) > MAX_TASKS:
            raise SubagentError(f"{len(task)} tasks is too many: at most {MAX_TASKS} at once")
        answers = await delegation.run_all(ctx.session, _origin(ctx), plan, task)
        text = _combined(answers)
        if not any(answer.ok for answer in answers):
            raise SubagentError(f"every delegated task failed\n{text}")
        return text

    return make_tool(delegate, name=DELEGATE_TOOL, risk="guarded", groups=GROUPS)


def agent_tool_name(agent_id: str) -> str:
    return AGENT_TOOL_PREFIX + agent_id


def agent_tool(delegation: Delegation, agents: AgentRegistry, spec: AgentSpec) -> Tool:
    """``agent_<id>(task)``: runs agent ``spec`` as the caller's delegate."""
    agent_id = spec.agent_id

    async def run_agent(
        task: Annotated[str, Field(description="what to do, self-contained")],
        ctx: ToolContext,
    ) -> str:
        current = agents.find(agent_id)
        if current is None or not current.as_tool:
            raise SubagentError(f"agent {agent_id} is no longer callable as a tool")
        plan = delegation.plan_agent(ctx.session, current)
        answer = await delegation.run(ctx.session, _origin(ctx), plan, task)
        if not answer.ok:
            raise SubagentError(answer.text)
        return answer.text

    description = " ".join(spec.description.split()) or f"Ask agent {spec.label} to do a task."
    return make_tool(
        run_agent,
        name=agent_tool_name(agent_id),
        description=f"{description} (Runs agent {agent_id}; its answer is the result.)",
        risk="guarded",
        groups=GROUPS,
    )


class AgentTools:
    """Keeps one ``agent_<id>`` tool in the registry per agent flagged ``as_tool``: call
    :meth:`sync` whenever the agents change (the registry's listener does)."""

    def __init__(
        self,
        *,
        delegation: Delegation,
        agents: AgentRegistry,
        registry: ToolRegistry,
        changed: Callable[[], Any],
    ) -> None:
        self.delegation = delegation
        self.agents = agents
        self.registry = registry
        self._changed = changed
        self._mine: dict[str, str] = {}  # tool name -> the description it was made with

    def sync(self) -> None:
        wanted = {agent_tool_name(s.agent_id): s for s in self.agents.all() if s.as_tool}
        changed = False
        for name in list(self._mine):
            spec = wanted.get(name)
            if spec is None or self._mine[name] != spec.description:
                self.registry.remove(name)
                del self._mine[name]
                changed = True
        for name, spec in wanted.items():
            if name in self._mine:
                continue
            if self.registry.get(name) is not None:
                log.warning("agent %s is not offered as a tool: %s is taken", spec.agent_id, name)
                continue
            self.registry.add(agent_tool(self.delegation, self.agents, spec))
            self._mine[name] = spec.description
            changed = True
        if changed:
            self._changed()
