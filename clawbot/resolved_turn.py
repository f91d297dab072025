"""What a turn resolves to: the session's agent, its effective model, the tools and skills
it is offered and the system prompt; and a child's narrowing of it to the ceiling its spawn
recorded (the runtime resolves; this module holds the record and the narrowing)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from clawbot.agents import MESSAGE_GROUP, AgentSpec, ModelSource
from clawbot.errors import MalformedMetaError
from clawbot.sessions import Session
from clawbot.skills import SKILL_READ, Skill, skills_prompt
from clawbot.subagents.records import ChildInfo
from clawbot.tools import Tool

log = logging.getLogger("clawbot.runtime")


@dataclass(frozen=True)
class ResolvedTurn:
    """Session -> agent -> the effective model, tools and prompt for one turn."""

    agent: AgentSpec
    model: str
    tools: tuple[Tool, ...]
    tool_specs: tuple[dict[str, Any], ...]
    system_prompt: str
    history_limit: int
    prompt_files: tuple[str, ...] = field(default=())
    model_source: ModelSource = "global default"
    skills: tuple[Skill, ...] = ()
    tool_names: frozenset[str] = frozenset()
    withheld_skills: tuple[str, ...] = ()
    """Skills its agent allows that a child may not use: its parent lacks them or a tool
    they need (refused at the ``skill_read`` call with that reason)."""


def within_ceiling(session: Session, resolved: ResolvedTurn) -> ResolvedTurn:
    """A child session's tools: its agent's, within the ceiling set when it was spawned
    (what its parent held then). Offered and executable: nothing else. A session
    nobody owns never gets the subagent ``message`` tool (its replies reach the person)."""
    if session.owner_key is None:
        if not resolved.agent.subagents.message:
            return resolved  # without the flag the tool is not among its agent's
        tools = tuple(t for t in resolved.tools if MESSAGE_GROUP not in t.groups)
        return replace(
            resolved,
            tools=tools,
            tool_specs=tuple(t.spec() for t in tools),
            tool_names=frozenset(t.name for t in tools),
        )
    prompt = resolved.system_prompt
    role_prompt: str | None = None
    try:
        child = ChildInfo.of(session)
        if child is None:
            return resolved
        allowed = frozenset(child.tools)
        skills_allowed = None if child.skills is None else frozenset(child.skills)
        role_prompt = child.prompt  # a delegate's role prompt
    except MalformedMetaError as exc:  # deny by default: no tools rather than all
        log.warning("session %s: %s", session.key, exc)
        allowed = skills_allowed = frozenset()
    tools = tuple(t for t in resolved.tools if t.name in allowed)
    names = frozenset(t.name for t in tools)
    skills = tuple(
        skill
        for skill in resolved.skills
        if SKILL_READ in names
        and names.issuperset(skill.requires_tools)
        and (skills_allowed is None or skill.name in skills_allowed)
    )
    if skills != resolved.skills:
        prompt = _listing(prompt, resolved.skills, skills)
    return replace(
        resolved,
        system_prompt=role_prompt or prompt,
        tools=tools,
        tool_specs=tuple(t.spec() for t in tools),
        tool_names=names,
        skills=skills,
        withheld_skills=tuple(s.name for s in resolved.skills if s not in skills),
    )


def _listing(prompt: str, listed: tuple[Skill, ...], kept: tuple[Skill, ...]) -> str:
    """``prompt`` with its section listing the skills ``listed`` cut down to ``kept`` (or
    left out, with the blank line before it, when none is kept)."""
    section = "\n\n" + skills_prompt(listed) if listed else ""
    if not section or section not in prompt:
        return prompt
    return prompt.replace(section, "\n\n" + skills_prompt(kept) if kept else "", 1)
