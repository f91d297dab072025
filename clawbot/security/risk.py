"""Each agent's risk profile: how much it may do without asking a person.

An agent's ``[risk_profiles.<name>]`` (its AgentSpec names one; ``default`` otherwise) sets
its autonomy and can narrow its tools and tighten any tool's level, never loosen it (the
profile itself, ``RiskProfile``, is in ``clawbot.policies``: settings hold them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from clawbot.agents.profiles import AgentSpec
from clawbot.errors import ClawbotError
from clawbot.policies import RiskProfile

log = logging.getLogger("clawbot.risk")

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
