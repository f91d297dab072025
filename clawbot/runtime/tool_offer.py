"""Which tools an agent is offered, and which a session may use: its agent's policy and
risk profile over the registry, narrowed for a child by the ceiling its spawn recorded.

Kept apart from the runtime because it is asked far more often than a turn is resolved:
every file tool call asks it of each session up its chain (``clawbot.security.reach``), so the
names are memoized on the very agent spec object (the registry hands out a new one when an
agent changes) instead of being read off a fully resolved turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from clawbot.agents.profiles import MESSAGE_GROUP, AgentSpec
from clawbot.routing.sessions import Session
from clawbot.runtime.resolved_turn import SessionCeiling
from clawbot.security.risk import AgentProfiles
from clawbot.tools.registry import Tool, ToolRegistry

MEMO_LIMIT = 256
"""Agents whose tool names are remembered at once; past it the memo starts over."""


@dataclass(frozen=True)
class _Names:
    agent: AgentSpec
    names: frozenset[str]
    without_messages: frozenset[str]
    """What a session nobody owns may use: not the subagent ``message`` tool."""


class ToolOffer:
    def __init__(self, tools: ToolRegistry, profiles: AgentProfiles) -> None:
        self.tools = tools
        self.profiles = profiles
        self._names: dict[str, _Names] = {}

    def changed(self) -> None:
        """The registry gained or lost a tool: work every agent's names out afresh."""
        self._names.clear()

    def offered(self, agent: AgentSpec) -> tuple[Tool, ...]:
        """The tools ``agent``'s own policy and its risk profile allow, in registry order."""
        profile = self.profiles.of(agent)
        return tuple(
            t
            for t in self.tools
            if agent.allows_tool(t.name, t.groups) and profile.offers(t.name, t.groups, t.risk)
        )

    def agent_tools(self, agent: AgentSpec) -> frozenset[str]:
        return self._of(agent).names

    def session_tools(self, session: Session, agent: AgentSpec) -> frozenset[str]:
        """The names ``within_ceiling`` leaves a session of ``agent`` (its
        ``SessionCeiling``), without resolving its turn."""
        names = self._of(agent)
        ceiling = SessionCeiling.of(session)
        held = names.names if ceiling.messages else names.without_messages
        return held if ceiling.tools is None else held & ceiling.tools

    def _of(self, agent: AgentSpec) -> _Names:
        memo = self._names.get(agent.agent_id)
        if memo is not None and memo.agent is agent:
            return memo
        tools = self.offered(agent)
        memo = _Names(
            agent=agent,
            names=frozenset(t.name for t in tools),
            without_messages=frozenset(t.name for t in tools if MESSAGE_GROUP not in t.groups),
        )
        if len(self._names) >= MEMO_LIMIT:
            self._names.clear()
        self._names[agent.agent_id] = memo
        return memo
