"""Spawning a subagent: a child session (channel ``internal``, never delivered, owned by its
parent, with its own transcript and agent) whose first message, the task, is injected on
lane ``subagent``. It returns at once; the child's result comes back as an announce.

Every limit is enforced here, where the child is created: the spawn depth (the length of
the owner chain, ``max_spawn_depth``), the children running at once (``max_children``), the
agents an agent may spawn (``subagents.allow``), and the child's tools and skills, which are
its own agent's within its parent's (what the parent lacks is refused, and named).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from clawbot.agents.profiles import AgentSpec
from clawbot.agents.registry import AgentRegistry
from clawbot.errors import SubagentError
from clawbot.messages import INTERNAL_CHANNEL, Provenance
from clawbot.routing.sessions import Session, child_key
from clawbot.runtime.turn import Runtime
from clawbot.scheduling.scheduler import Scheduler
from clawbot.settings import Settings
from clawbot.store import Store, new_id
from clawbot.subagents.ceiling import children_skills
from clawbot.subagents.coordinator import children_ceiling
from clawbot.subagents.injection import Injector, TurnOrigin
from clawbot.subagents.records import CHILD_META, ChildInfo, Injection

LABEL_CHARS = 60


@dataclass(frozen=True)
class Spawned:
    """A child just created: its id and key, its agent and label, and the tools its agent
    and skills its agent would have had that its parent lacks (refused to it)."""

    child_id: str
    key: str
    agent_id: str
    label: str
    timeout: float
    refused_tools: tuple[str, ...] = ()
    refused_skills: tuple[str, ...] = ()
    """Skills its agent allows that it does not get: its parent lacks them, or the tools
    they need."""


@dataclass(frozen=True)
class _Admitted:
    """A spawn that passed every check: the child's agent, id, depth and run timeout, and
    the injection of its task."""

    spec: AgentSpec
    child_id: str
    depth: int
    timeout: float
    injection: Injection


class Spawner:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        scheduler: Scheduler,
        runtime: Runtime,
        agents: AgentRegistry,
        injector: Injector,
    ) -> None:
        self.settings = settings
        self.store = store
        self.scheduler = scheduler
        self.runtime = runtime
        self.agents = agents
        self.injector = injector

    async def check(
        self,
        parent: Session,
        task: str,
        origin: TurnOrigin,
        *,
        agent: str | None = None,
        label: str | None = None,
        timeout: float | None = None,
        turn_id: str | None = None,
    ) -> None:
        """Raise the SubagentError :meth:`spawn` would end in, creating nothing: asked
        before a person is asked to approve the spawn, so nobody approves one that cannot
        run (an unknown agent, one it may not spawn, a depth or children limit)."""
        await self._admit(parent, task, origin, agent, label, timeout, turn_id)

    async def spawn(
        self,
        parent: Session,
        task: str,
        origin: TurnOrigin,
        *,
        agent: str | None = None,
        label: str | None = None,
        timeout: float | None = None,
        turn_id: str | None = None,
    ) -> Spawned:
        """Create the child and inject its task; a SubagentError says what was refused.

        Within one turn (``turn_id``) the same spawn names the same child: a turn rerun
        after a crash, whose spawn ran before its result was stored, finds the child it
        made then (and stores its task, if the crash came before that) instead of
        starting a second one that would report twice."""
        admitted = await self._admit(parent, task, origin, agent, label, timeout, turn_id)
        if isinstance(admitted, Session):
            return await self._again(admitted, self.agents.get(parent.agent_id).name, task, origin)
        spec, injection = admitted.spec, admitted.injection
        within = await children_ceiling(parent, runtime=self.runtime, sessions=self.store.sessions)
        own = self.runtime.agent_tools(spec)
        skills = await children_skills(parent, runtime=self.runtime, sessions=self.store.sessions)
        would = {s.name for s in self.runtime.skills.for_agent(spec, own)}
        held = {s.name for s in self.runtime.skills.for_agent(spec, own & within)}
        held = held if skills is None else held & skills
        name = (label or task).strip().splitlines()[0][:LABEL_CHARS]
        info = ChildInfo(
            child_id=admitted.child_id,
            parent_key=parent.key,
            label=name,
            task=task,
            depth=admitted.depth,
            timeout=admitted.timeout,
            tools=tuple(sorted(own & within)),
            skills=tuple(sorted(held)),
        )
        await self.store.sessions.create(
            Session(
                key=injection.target_key,
                channel=INTERNAL_CHANNEL,
                chat_id=admitted.child_id,
                agent_id=spec.agent_id,
                deliver=False,
                owner_key=parent.key,
                meta={CHILD_META: info.model_dump(mode="json")},
            )
        )
        await self.injector.inject(injection)
        return Spawned(
            child_id=admitted.child_id,
            key=injection.target_key,
            agent_id=spec.agent_id,
            label=name,
            timeout=admitted.timeout,
            refused_tools=tuple(sorted(own - within)),
            refused_skills=tuple(sorted(would - held)),
        )

    async def _admit(
        self,
        parent: Session,
        task: str,
        origin: TurnOrigin,
        agent: str | None,
        label: str | None,
        timeout: float | None,
        turn_id: str | None,
    ) -> _Admitted | Session:
        """What a spawn would create, every limit checked (a SubagentError says which
        refused it); or the child this very spawn made before its turn was rerun."""
        if not task.strip():
            raise SubagentError("the task is empty", hint="say what the subagent should do")
        parent_agent = self.agents.get(parent.agent_id)
        spec = self.agents.exact(agent) if agent else parent_agent
        if spec is None:
            known = ", ".join(s.agent_id for s in self.agents.all())
            raise SubagentError(f"there is no agent {agent!r}", hint=f"the agents are: {known}")
        if not parent_agent.may_spawn(spec.agent_id):
            allowed = parent_agent.subagents.allow
            may = ", ".join(allowed) if allowed else parent_agent.agent_id
            raise SubagentError(
                f"agent {parent_agent.agent_id} may not spawn agent {spec.agent_id}",
                hint=f"it may spawn: {may or 'no agent'} (subagents.allow in its profile)",
            )
        child_id = spawn_id(parent.key, turn_id, spec.agent_id, task, label, timeout)
        key = child_key(parent.key, child_id)
        made = await self.store.sessions.get(key)
        if made is not None and made.owner_key == parent.key:
            return made
        depth = ChildInfo.depth_of(parent) + 1
        if depth > self.settings.max_spawn_depth:
            raise SubagentError(
                f"spawn depth limit reached: a child here would be at depth {depth}, "
                f"and max_spawn_depth is {self.settings.max_spawn_depth}",
                hint="do the work yourself, or report back to your parent",
            )
        running = await self._running_children(parent)
        if running >= self.settings.max_children:
            raise SubagentError(
                f"children limit reached: {running} children of this session are running, "
                f"and max_children is {self.settings.max_children}",
                hint="wait for one to report back, or stop one with sessions_stop",
            )
        if timeout is not None and not 0 < timeout <= 86_400:
            raise SubagentError(f"timeout {timeout} is not between 0 and 86400 seconds")
        injection = _task(key, spec.agent_id, parent.key, parent_agent.name, task, origin)
        self.injector.check(injection)  # before the child exists: a refusal leaves nothing
        return _Admitted(
            spec=spec,
            child_id=child_id,
            depth=depth,
            timeout=timeout or self.settings.subagent_timeout,
            injection=injection,
        )

    async def _again(
        self, child: Session, parent_name: str, task: str, origin: TurnOrigin
    ) -> Spawned:
        """The child this spawn made before the turn was rerun: its task is injected (a
        no-op when it was stored then) and it is reported as spawned, with no new limits."""
        info = ChildInfo.of(child)
        assert info is not None and child.owner_key is not None
        await self.injector.inject(
            _task(child.key, child.agent_id, child.owner_key, parent_name, task, origin)
        )
        return Spawned(
            child_id=info.child_id,
            key=child.key,
            agent_id=child.agent_id,
            label=info.label,
            timeout=info.timeout,
            refused_tools=(),
        )

    async def _running_children(self, parent: Session) -> int:
        """Children with a turn running or waiting to run."""
        running = 0
        for key in await self.store.sessions.child_keys(parent.key):
            state = self.scheduler.queue_state(key)
            if state.active or state.backlog or state.queued or state.waiting_lane:
                running += 1
        return running


def spawn_id(
    parent_key: str,
    turn_id: str | None,
    agent_id: str,
    task: str,
    label: str | None,
    timeout: float | None,
) -> str:
    """A child's id: the same for the same spawn by the same turn (so a rerun finds the
    child), a new one when no turn is known."""
    if turn_id is None:
        return new_id("sub")
    spawn = json.dumps([parent_key, turn_id, agent_id, task, label, timeout])
    return "sub_" + hashlib.sha256(spawn.encode()).hexdigest()[:19]


def _task(
    key: str, agent_id: str, parent_key: str, parent_name: str, task: str, origin: TurnOrigin
) -> Injection:
    """The injection of a child's task: stored once under ``task:<child key>``."""
    hop, trace = origin.onward(key, agent_id)
    return Injection(
        kind="task",
        target_key=key,
        source_key=parent_key,
        text=task,
        provenance=Provenance(
            channel=INTERNAL_CHANNEL,
            sender_id=parent_key,
            sender_name=parent_name,
            message_id=f"task:{key}",
            source="internal",
        ),
        idempotency_key=f"task:{key}",
        hop=hop,
        trace=trace,
    )
