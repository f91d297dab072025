"""What an agent may do: which tools it may hold (``ToolPolicy``) and how much it may do
without asking a person (``RiskProfile``, a ``[risk_profiles.<name>]`` table of settings).

Foundation, because settings hold the risk profiles and agent profiles hold the tool
policies; the behaviour around them (each agent's profile, approvals) is in
``clawbot.security``. Every tool has a risk level: ``safe`` runs; ``guarded`` needs an
approval once per session (or a standing grant in settings); ``unsafe`` needs a confirmation
for every call. A profile's autonomy:

- ``read_only``: only safe tools are offered at all;
- ``supervised``: guarded and unsafe tools ask (the default);
- ``full``: guarded tools run without asking; unsafe ones still ask every time.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ToolPolicy(BaseModel):
    """Allow/deny lists of tool names, ``*`` wildcards and ``group:...`` names; deny wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()

    def permits(self, name: str, groups: Iterable[str] = ()) -> bool:
        labels = (name, *groups)
        if self.denies(name, groups):
            return False
        return any(_matches(pattern, labels) for pattern in self.allow)

    def denies(self, name: str, groups: Iterable[str] = ()) -> bool:
        return any(_matches(pattern, (name, *groups)) for pattern in self.deny)


def _matches(pattern: str, labels: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(label, pattern) for label in labels)


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
