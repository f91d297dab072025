"""What a turn resolves to: the session's agent, its effective model, the tools and skills
it is offered and the system prompt; and a child's narrowing of it to the ceiling its spawn
recorded (the runtime resolves; this module holds the record and the narrowing)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from clawbot.agents.profiles import MESSAGE_GROUP, AgentSpec, ModelSource
from clawbot.agents.skills import SKILL_READ, Skill, skills_prompt
from clawbot.errors import MalformedMetaError
from clawbot.routing.sessions import Session
from clawbot.subagents.records import ChildInfo
from clawbot.tools.registry import Tool

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
    fallbacks: tuple[str, ...] = ()
    """The models a call moves to, in order, when ``model`` is down."""
    skills: tuple[Skill, ...] = ()
    tool_names: frozenset[str] = frozenset()
    withheld_skills: tuple[str, ...] = ()
    """Skills its agent allows that a child may not use: its parent lacks them or a tool
    they need (refused at the ``skill_read`` call with that reason)."""
    narrowed: dict[SessionCeiling, ResolvedTurn] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """This turn within each ceiling it was asked for (see ``within_ceiling``), a cache of
    its own (``replace`` starts a new one): the runtime memoizes a resolved turn, and most
    turns are of the same few ceilings."""


@dataclass(frozen=True)
class SessionCeiling:
    """What a session's own record lets its turns hold, its agent's policy aside: a child
    what its spawn recorded (its parent's tools and skills then, a delegate's role prompt);
    a person's conversation anything but the subagent ``message`` tool (its replies reach
    the person already)."""

    tools: frozenset[str] | None = None
    """None: its agent's tools, not narrowed."""
    skills: frozenset[str] | None = None
    role_prompt: str | None = None
    messages: bool = True

    @classmethod
    def of(cls, session: Session) -> SessionCeiling:
        if session.owner_key is None:
            return PERSON_CEILING
        try:
            child = ChildInfo.of(session)
        except MalformedMetaError as exc:  # deny by default: no tools rather than all
            log.warning("session %s: %s", session.key, exc)
            return cls(tools=frozenset(), skills=frozenset())
        if child is None:
            return cls()
        skills = None if child.skills is None else frozenset(child.skills)
        return cls(tools=frozenset(child.tools), skills=skills, role_prompt=child.prompt)

    def permits(self, name: str, groups: tuple[str, ...]) -> bool:
        return (self.tools is None or name in self.tools) and (
            self.messages or MESSAGE_GROUP not in groups
        )


PERSON_CEILING = SessionCeiling(messages=False)
"""The ceiling of every person's conversation."""

MAX_NARROWED = 64
"""Ceilings kept per resolved turn: a parent's children mostly share one."""


def within_ceiling(session: Session, resolved: ResolvedTurn) -> ResolvedTurn:
    """A session's tools (offered and executable: nothing else) and skills within its
    ceiling (see ``SessionCeiling``). Asked every turn, so it is kept on ``resolved`` per
    ceiling: the result depends on nothing else."""
    ceiling = SessionCeiling.of(session)
    found = resolved.narrowed.get(ceiling)
    if found is None:
        if len(resolved.narrowed) >= MAX_NARROWED:
            resolved.narrowed.clear()
        found = resolved.narrowed[ceiling] = _narrow(resolved, ceiling)
    return found


def _narrow(resolved: ResolvedTurn, ceiling: SessionCeiling) -> ResolvedTurn:
    tools = tuple(t for t in resolved.tools if ceiling.permits(t.name, t.groups))
    if ceiling.tools is None:  # a person's conversation, or a session without a record
        if len(tools) == len(resolved.tools):
            return resolved
        return replace(
            resolved,
            tools=tools,
            tool_specs=tuple(t.spec() for t in tools),
            tool_names=frozenset(t.name for t in tools),
        )
    names = frozenset(t.name for t in tools)
    skills = tuple(
        skill
        for skill in resolved.skills
        if SKILL_READ in names
        and names.issuperset(skill.requires_tools)
        and (ceiling.skills is None or skill.name in ceiling.skills)
    )
    prompt = resolved.system_prompt
    if skills != resolved.skills:
        prompt = _listing(prompt, resolved.skills, skills)
    return replace(
        resolved,
        system_prompt=ceiling.role_prompt or prompt,
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
