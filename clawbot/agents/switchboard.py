"""The seam through which slash commands and LLM tools change a session's agent or model
and manage agent profiles, without reaching into the router.

Session changes go through the router's ``update_session`` (bound at start-up), which
persists them and keeps its session cache coherent; they take effect on the next turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from clawbot.agents.model_catalog import ModelCatalog
from clawbot.agents.profiles import AgentSpec, ModelSource, effective_model
from clawbot.agents.registry import AgentRegistry
from clawbot.routing.sessions import Session
from clawbot.settings import Settings

SessionUpdater = Callable[..., Awaitable[Session]]
"""``update(session, **changes) -> Session``: persist and cache the changed session."""


class GrantableTool(Protocol):
    """What granting checks need of a tool (a ``clawbot.tools.registry.Tool``): the tools module
    knows the switchboard (a tool's context carries it), so not the other way round."""

    @property
    def name(self) -> str: ...

    @property
    def groups(self) -> tuple[str, ...]: ...

    @property
    def high_risk(self) -> bool: ...


class Switchboard:
    def __init__(
        self,
        *,
        settings: Settings,
        agents: AgentRegistry,
        catalog: ModelCatalog,
        tools: Iterable[GrantableTool],
    ) -> None:
        self.settings = settings
        self.agents = agents
        self.catalog = catalog
        self.tools = tools
        """Every tool of the process (a ``ToolRegistry``), walked again at each check."""
        self._update: SessionUpdater | None = None

    def bind(self, update: SessionUpdater) -> None:
        """Route session changes through ``update`` (the router's ``update_session``)."""
        self._update = update

    async def update_session(self, session: Session, **changes: Any) -> Session:
        if self._update is None:
            raise RuntimeError("the switchboard is not bound to a router yet")
        return await self._update(session, **changes)

    def model_of(self, session: Session) -> tuple[str, ModelSource]:
        agent = self.agents.get(session.agent_id)
        return effective_model(session.model_override, agent, self.settings.model)

    def granted_beyond(self, actor: AgentSpec, new: AgentSpec, old: AgentSpec | None) -> list[str]:
        """High-risk tools ``new`` would gain (over ``old``) that ``actor`` itself lacks: an
        agent cannot hand out more capability than it holds."""
        return [
            tool.name
            for tool in self.tools
            if tool.high_risk
            and new.allows_tool(tool.name, tool.groups)
            and not (old is not None and old.allows_tool(tool.name, tool.groups))
            and not actor.allows_tool(tool.name, tool.groups)
        ]
