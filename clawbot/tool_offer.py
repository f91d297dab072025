"""Which tools an agent is offered, and which a session may use: its agent's policy and
risk profile over the registry, narrowed for a child by the ceiling its spawn recorded.

Kept apart from the runtime because it is asked far more often than a turn is resolved:
every file tool call asks it of each session up its chain (``clawbot.reach``), so the
names are memoized on the very agent spec object (the registry hands out a new one when an
agent changes) instead of being read off a fully resolved turn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from clawbot.agents import MESSAGE_GROUP, AgentSpec
from clawbot.errors import MalformedMetaError
from clawbot.risk import AgentProfiles
from clawbot.sessions import Session
from clawbot.subagents.records import ChildInfo
from clawbot.tools import Tool, ToolRegistry

log = logging.getLogger("clawbot.runtime")
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
        """The names ``Runtime.within_ceiling`` leaves a session of ``agent``: a child's
        within what its spawn recorded (none when that record is unreadable: deny by
        default), a person's conversation without the ``message`` tool."""
        names = self._of(agent)
        if session.owner_key is None:
            return names.without_messages
        try:
            child = ChildInfo.of(session)
        except MalformedMetaError as exc:
            log.warning("session %s: %s", session.key, exc)
            return frozenset()
        if child is None:
            return names.names
        return names.names.intersection(child.tools)

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
