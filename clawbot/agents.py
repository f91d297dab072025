"""Agent profiles: which model, prompt, tools, skills and context policy drive a session."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_AGENT_ID = "main"


class ToolPolicy(BaseModel):
    """Allow/deny lists of tool names, ``*`` wildcards and ``group:...`` names; deny wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()

    def permits(self, name: str, groups: Iterable[str] = ()) -> bool:
        labels = (name, *groups)
        if any(_matches(pattern, labels) for pattern in self.deny):
            return False
        return any(_matches(pattern, labels) for pattern in self.allow)


def _matches(pattern: str, labels: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(label, pattern) for label in labels)


class ContextPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_recall: bool = False
    max_history_messages: int | None = Field(default=None, ge=2)


class AgentSpec(BaseModel):
    """An agent profile. Stored as data; switching a session's agent switches its profile."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,39}$")
    name: str = Field(min_length=1, max_length=60)
    description: str = ""
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    system_prompt: str | None = None
    tools: ToolPolicy = ToolPolicy()
    skills: ToolPolicy = ToolPolicy()
    context: ContextPolicy = ContextPolicy()
    workspace_overlay: bool = True
    risk_profile: str = "default"


DEFAULT_AGENT = AgentSpec(
    agent_id=DEFAULT_AGENT_ID,
    name="main",
    description="The default general-purpose assistant.",
)
