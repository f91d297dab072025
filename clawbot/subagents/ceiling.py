"""What a child may at most hold, read from its chain of owners: a child's skills are its
own agent's within its parent's, and its workspace reach is its own within each owner's in
turn, up to the person's conversation.

A coordinator passes its own ceiling on (see ``clawbot.subagents.coordinator``): it holds
no file tools or skills itself, yet its workers keep theirs within what its session may
reach. A chain that is broken or too long gives no more than the session's own scratchpad
(deny by default).

The reach is looked up on every file tool call, from the stored owners and the agents as
they are now: a parent whose policy narrows after the spawn narrows its running child on
its next call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from clawbot.agents.chains import MAX_CHAIN, owners
from clawbot.agents.profiles import SCRATCHPAD_GROUP, AgentSpec
from clawbot.routing.sessions import Session
from clawbot.security.reach import Reach, Root
from clawbot.store.protocols.conversations import Sessions
from clawbot.subagents.scratchpad import folder_of
from clawbot.tools.registry import ToolRegistry


class Policies(Protocol):
    """What a ceiling reads of the runtime (``clawbot.runtime.turn.Runtime``): the agents and
    tools as they are now, and each session's effective tools and skills."""

    @property
    def agents(self) -> Callable[[str], AgentSpec]: ...

    @property
    def tools(self) -> ToolRegistry: ...

    def effective_tools(self, session: Session) -> frozenset[str]: ...

    def effective_skills(self, session: Session) -> frozenset[str]: ...


@dataclass(frozen=True)
class CeilingHolder:
    """The session whose effective policy bounds a session's children: the session itself,
    or for a coordinator the first owner up its chain that is not one. ``session`` is None
    when nothing bounds them (a coordinator in a person's conversation: ``unbounded``) or
    the chain is broken (everything is refused)."""

    session: Session | None
    unbounded: bool = False


async def ceiling_holder(
    session: Session, *, runtime: Policies, sessions: Sessions
) -> CeilingHolder:
    current = session
    for _ in range(MAX_CHAIN):
        if not runtime.agents(current.agent_id).coordinator:
            return CeilingHolder(current)
        if current.owner_key is None:
            return CeilingHolder(None, unbounded=True)
        owner = await sessions.get(current.owner_key)
        if owner is None:
            return CeilingHolder(None)
        current = owner
    return CeilingHolder(None)


async def children_skills(
    session: Session, *, runtime: Policies, sessions: Sessions
) -> frozenset[str] | None:
    """The skills a child of ``session`` may at most use: its ceiling holder's effective
    skills; None when nothing bounds them."""
    holder = await ceiling_holder(session, runtime=runtime, sessions=sessions)
    if holder.unbounded:
        return None
    if holder.session is None:
        return frozenset()
    return runtime.effective_skills(holder.session)


async def session_reach(session: Session, *, runtime: Policies, sessions: Sessions) -> Reach:
    """The workspace reach of ``session`` now: its own (its agent's folder and siblings, by
    its effective tools) within every owner's up its chain, coordinators passing theirs on;
    plus the scratchpad folder of its own session when it holds the scratchpad tools, and of
    its parent when that is a coordinator which holds them (its workers read and write the
    notes the coordinator points them to): scratchpads pass every ceiling."""
    above = await owners(sessions, session)
    if (above[-1] if above else session).owner_key is not None:
        return _scratchpad(session, runtime, Reach())  # a broken chain: an owner is gone
    ceiling = Reach.whole()
    for owner in reversed(above):
        if not runtime.agents(owner.agent_id).coordinator:
            ceiling = _own(owner, runtime).within(ceiling)
    own = _own(session, runtime)
    reach = own.within(ceiling)
    if above and own.roots and runtime.agents(above[0].agent_id).coordinator:
        writes = any(root.write for root in own.roots)
        reach = _scratchpad(above[0], runtime, reach, write=writes)
    return _scratchpad(session, runtime, reach)


def _own(session: Session, runtime: Policies) -> Reach:
    return Reach.of_agent(runtime.agents(session.agent_id), runtime.effective_tools(session))


def _scratchpad(session: Session, runtime: Policies, reach: Reach, *, write: bool = True) -> Reach:
    tools = runtime.effective_tools(session)
    if any(SCRATCHPAD_GROUP in t.groups for t in runtime.tools if t.name in tools):
        return reach.plus(Root(folder_of(session.key), write=write))
    return reach
