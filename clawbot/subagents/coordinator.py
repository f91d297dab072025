"""Coordinator mode: asymmetric tools. A coordinator (``coordinator = true``) holds only the
tools that spawn, message, list and stop workers and its scratchpad, yet the workers it
spawns keep their own tools: a worker's ceiling is not the coordinator's own tools (that
would leave it none) but what the coordinator's session may reach, the ceiling it sits
under itself.

The scratchpad tools pass every ceiling: they reach nothing but the holder's own folder,
so a coordinator spawned by another agent (which holds none) still gets its scratchpad.

So nothing else escalates: a coordinator in a person's conversation reaches what any agent
there could (each worker still only what its own profile allows, and only agents its
``subagents.allow`` names), and a coordinator that is itself a child passes on its
parent's ceiling, never more.
"""

from __future__ import annotations

from clawbot.agents.profiles import SCRATCHPAD_GROUP
from clawbot.routing.sessions import Session
from clawbot.runtime.turn import Runtime
from clawbot.store.protocols.conversations import Sessions
from clawbot.subagents.ceiling import ceiling_holder
from clawbot.subagents.messaging import reach_of


async def children_ceiling(
    session: Session, *, runtime: Runtime, sessions: Sessions
) -> frozenset[str]:
    """The tools a child of ``session`` may at most hold: its parent's effective tools (and
    reach) and the scratchpad tools, or, for a coordinator, the ceiling of the coordinator's
    own session. An owner chain that is broken or too long gives no more than the
    scratchpad (deny by default)."""
    scratchpad = frozenset(t.name for t in runtime.tools if SCRATCHPAD_GROUP in t.groups)
    holder = await ceiling_holder(session, runtime=runtime, sessions=sessions)
    if holder.unbounded:
        return frozenset(runtime.tools.names())
    if holder.session is None:
        return scratchpad
    return runtime.effective_tools(holder.session) | reach_of(holder.session) | scratchpad
