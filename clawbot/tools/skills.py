"""The skill tool: ``skill_read``, in ``group:skills``, gives the body of one of the skills
listed to the agent this turn (``clawbot.agents.skills`` finds and lists them)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from clawbot.errors import ToolError
from clawbot.tools.registry import Tool, ToolContext, make_tool


async def skill_read(
    name: Annotated[str, Field(description="the skill's name, as listed under Skills")],
    ctx: ToolContext,
) -> str:
    """Read the instructions of one of your skills."""
    for skill in ctx.skills:
        if skill.name == name:
            return skill.body
    available = ", ".join(s.name for s in ctx.skills) or "none"
    if name in ctx.withheld_skills:
        raise ToolError(
            f"the skill {name!r} is not available to you: a subagent uses only skills the "
            "session that started it may use (and whose tools it holds)",
            hint=f"your skills: {available}; report back if you need that one",
        )
    raise ToolError(
        f"no skill named {name!r} is available to you", hint=f"your skills: {available}"
    )


def skill_tools() -> list[Tool]:
    return [make_tool(skill_read, risk="safe", groups=("group:skills",))]
