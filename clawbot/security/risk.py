"""Risk profiles: how much an agent may do without asking a person.

Every tool has a risk level: ``safe`` runs; ``guarded`` needs an approval once per session
(or a standing grant in settings); ``unsafe`` needs a confirmation for every call. An
agent's ``[risk_profiles.<name>]`` (its AgentSpec names one; ``default`` otherwise) sets its
autonomy and can narrow its tools and tighten any tool's level, never loosen it:

- ``read_only``: only safe tools are offered at all;
- ``supervised``: guarded and unsafe tools ask (the default);
- ``full``: guarded tools run without asking; unsafe ones still ask every time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clawbot.agents.profiles import AgentSpec, ToolPolicy
from clawbot.errors import ClawbotError

log = logging.getLogger("clawbot.risk")

Risk = Literal["safe", "guarded", "unsafe"]
Autonomy = Literal["read_only", "supervised", "full"]
DEFAULT_PROFILE = "default"
_ORDER: dict[Risk, int] = {"safe": 0, "guarded": 1, "unsafe": 2}


class RiskProfile(BaseModel):
    """A ``[risk_profiles.<name>]`` table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    autonomy: Autonomy = "supervised"
    tools: ToolPolicy = ToolPolicy()
    """Tools agents of this profile may hold at all (within their own tool policy)."""
    risk: dict[str, Risk] = Field(default_factory=dict)
    """A tool's level for this profile, e.g. ``file_write = "unsafe"``: only ever raised."""

    def level(self, tool: str, declared: Risk) -> Risk:
        """The tool's effective risk: its own, or the profile's when that is higher."""
        tightened = self.risk.get(tool, declared)
        return tightened if _ORDER[tightened] > _ORDER[declared] else declared

    def offers(self, tool: str, groups: tuple[str, ...], declared: Risk) -> bool:
        """Whether an agent of this profile is offered the tool at all."""
        if not self.tools.permits(tool, groups):
            return False
        return self.autonomy != "read_only" or self.level(tool, declared) == "safe"

    def asks(self, tool: str, declared: Risk) -> bool:
        """Whether a call needs a person's answer before it runs (grants aside)."""
        level = self.level(tool, declared)
        if level == "unsafe":
            return True
        return level == "guarded" and self.autonomy != "full"


def strictest(levels: Iterable[Risk]) -> Risk:
    """The highest of ``levels`` (``safe`` when there are none)."""
    return max(levels, key=_ORDER.__getitem__, default="safe")


READ_ONLY = RiskProfile(autonomy="read_only")
"""What an agent naming a profile that settings lack gets: the strictest reading."""


class AgentProfiles:
    """Each agent's risk profile by the name its spec gives, from settings' lookup (a name
    settings lack is read-only, and said once in the log)."""

    def __init__(
        self,
        lookup: Callable[[str], RiskProfile | None],
        agents: Callable[[str], AgentSpec],
    ) -> None:
        self._lookup = lookup
        self._agents = agents
        self._warned: set[str] = set()

    def of(self, agent: AgentSpec) -> RiskProfile:
        profile = self._lookup(agent.risk_profile)
        if profile is not None:
            return profile
        if agent.risk_profile not in self._warned:
            self._warned.add(agent.risk_profile)
            log.warning(
                "agent %s names the risk profile %r, which settings lack: it is read-only",
                agent.agent_id,
                agent.risk_profile,
            )
        return READ_ONLY

    def of_chain(self, ancestors: Sequence[str], agent: AgentSpec) -> tuple[RiskProfile, ...]:
        """The profiles of the agents above a session (ids, root first) and of its own: a
        child asks whenever any of them would. An agent deleted since reads as read-only."""
        profiles = []
        for agent_id in ancestors:
            try:
                profiles.append(self.of(self._agents(agent_id)))
            except ClawbotError:
                profiles.append(READ_ONLY)
        return (*profiles, self.of(agent))
