"""What an agent can do with its subagents (the ``sessions_*`` tools call these): spawn one,
continue one of its own children, list them, read one's history, stop them. Every call
names a child of the calling session, or is refused with a clear error listing its
children. Assembles the injector, spawner and announcer of one bot."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from clawbot.agents.registry import AgentRegistry
from clawbot.errors import MalformedMetaError, SubagentError
from clawbot.messages import INTERNAL_CHANNEL, Provenance, TranscriptEntry
from clawbot.routing.sessions import Session, child_id_of
from clawbot.runtime.turn import Runtime
from clawbot.scheduling.records import StopReport
from clawbot.scheduling.scheduler import Scheduler
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.subagents.announce import Announcer
from clawbot.subagents.delegation import Delegation
from clawbot.subagents.exchanges import PeerExchanges
from clawbot.subagents.injection import Injector, TurnOrigin
from clawbot.subagents.peers import PeerMessages, PeerView
from clawbot.subagents.records import ChildInfo, Injection
from clawbot.subagents.spawning import Spawned, Spawner
from clawbot.subagents.tree import stop_family

ChildState = Literal["running", "waiting", "idle"]


@dataclass(frozen=True)
class ChildView:
    """One child as its parent's agent sees it in ``sessions_list``."""

    child_id: str
    key: str
    agent_id: str
    label: str
    state: ChildState
    delegate: bool = False
    """A delegate: listed (``/subagents`` lists it too), never continued or stopped by the
    ``sessions_*`` tools, since its answer belongs to the tool call that ran it."""


@dataclass(frozen=True)
class ChildStopped:
    """One child stopped: its own stop, and how many running turns below it (its children,
    grandchildren...) were stopped with it."""

    child_id: str
    report: StopReport
    descendants: int = 0


class DelegateNamed(SubagentError):
    """A ``sessions_*`` tool named a delegate, which ``sessions_list`` lists but which only
    the tool call that ran it may use."""


class SubagentControl:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        scheduler: Scheduler,
        runtime: Runtime,
        agents: AgentRegistry,
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        self.agents = agents
        self.injector = Injector(settings=settings, store=store, scheduler=scheduler)
        self.spawner = Spawner(
            settings=settings,
            store=store,
            scheduler=scheduler,
            runtime=runtime,
            agents=agents,
            injector=self.injector,
        )
        self.exchanges = PeerExchanges()
        self.announcer = Announcer(
            store=store, injector=self.injector, agents=agents, exchanges=self.exchanges
        )
        self.peers = PeerMessages(settings=settings, store=store, agents=agents)
        self.delegation = Delegation(
            settings=settings,
            store=store,
            scheduler=scheduler,
            runtime=runtime,
            agents=agents,
            injector=self.injector,
        )

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
        self.delegation.refuse_nested(parent)
        return await self.spawner.spawn(
            parent, task, origin, agent=agent, label=label, timeout=timeout, turn_id=turn_id
        )

    async def child(self, parent: Session, ref: str) -> Session:
        """The child of ``parent`` that ``ref`` (its id or key) names; a delegate is
        refused (:class:`DelegateNamed`), it belongs to the tool call that ran it."""
        ref = ref.strip()
        everyone = await self.store.sessions.children(parent.key)
        for child in everyone:
            if ref in (child.key, child_id_of(child.key)):
                if ChildInfo.is_delegate(child):
                    raise DelegateNamed(
                        f"{ref!r} is a delegate: its answer was the result of the tool call "
                        "that ran it, and it takes no further messages or stops",
                        hint="delegate again, or spawn a subagent to work on",
                    )
                return child
        children = [child for child in everyone if not ChildInfo.is_delegate(child)]
        ids = ", ".join(child_id_of(c.key) or c.key for c in children) or "none"
        raise SubagentError(
            f"{ref!r} is not a child of this session", hint=f"your children are: {ids}"
        )

    async def check_spawn(
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
        """Raise the SubagentError :meth:`spawn` would end in, doing nothing."""
        self.delegation.refuse_nested(parent)
        await self.spawner.check(
            parent, task, origin, agent=agent, label=label, timeout=timeout, turn_id=turn_id
        )

    async def send(
        self, parent: Session, ref: str, message: str, origin: TurnOrigin, turn_id: str | None
    ) -> Session:
        """Continue a child: ``message`` becomes its next turn (lane ``subagent``); its
        answer comes back as another announce. The same message sent twice by one turn is
        stored once. Or message a peer session (see :mod:`clawbot.subagents.peers`)."""
        target, injection = await self._message(parent, ref, message, origin, turn_id)
        await self.injector.inject(injection)
        if target.owner_key != parent.key:  # a peer: their reports wait for the exchange's end
            self.exchanges.joined(injection.trace.trace_id, parent, target)
        return target

    async def check_send(
        self, parent: Session, ref: str, message: str, origin: TurnOrigin, turn_id: str | None
    ) -> None:
        """Raise the SubagentError :meth:`send` would end in (not a child nor a peer, a
        loop, past ``max_hops``), sending nothing."""
        _, injection = await self._message(parent, ref, message, origin, turn_id)
        self.injector.check(injection)

    async def _message(
        self, parent: Session, ref: str, message: str, origin: TurnOrigin, turn_id: str | None
    ) -> tuple[Session, Injection]:
        """The session ``ref`` names (a child of ``parent``, else a peer it may message) and
        the injection of ``message`` into it."""
        self.delegation.refuse_nested(parent)
        if not message.strip():
            raise SubagentError("the message is empty")
        try:
            child = await self.child(parent, ref)
        except DelegateNamed:
            raise
        except SubagentError:
            peer = await self.peers.session(ref)
            if peer is None:
                raise
            return peer, self.peers.message(parent, peer, message, origin, turn_id)
        hop, trace = origin.onward(child.key, child.agent_id)
        digest = hashlib.sha256(message.encode()).hexdigest()[:16]
        key = f"message:{child.key}:{turn_id or '-'}:{digest}"
        return child, Injection(
            kind="message",
            target_key=child.key,
            source_key=parent.key,
            text=message,
            provenance=Provenance(
                channel=INTERNAL_CHANNEL,
                sender_id=parent.key,
                sender_name=self.agents.get(parent.agent_id).name,
                message_id=key,
                source="internal",
            ),
            idempotency_key=key,
            hop=hop,
            trace=trace,
        )

    async def children(self, parent: Session) -> list[ChildView]:
        """Every child of ``parent``, delegates included (marked): the children
        ``/subagents`` lists."""
        views = []
        for child in await self.store.sessions.children(parent.key):
            state = self.scheduler.queue_state(child.key)
            status: ChildState = (
                "running"
                if state.active is not None
                else "waiting"
                if state.backlog or state.queued or state.waiting_lane
                else "idle"
            )
            try:
                info = ChildInfo.of(child)
            except MalformedMetaError:
                info = None
            label = info.label if info is not None else ""
            child_id = child_id_of(child.key) or child.key
            delegate = info is not None and info.delegated
            views.append(ChildView(child_id, child.key, child.agent_id, label, status, delegate))
        return views

    async def peer_sessions(self, session: Session) -> list[PeerView]:
        """The peer sessions ``session`` may message with ``sessions_send``."""
        return await self.peers.reachable(session)

    async def _children(self, parent: Session) -> list[Session]:
        """The children the ``sessions_*`` tools reach: not the delegates, which belong to
        the tool call that runs them (their answer is its result)."""
        children = await self.store.sessions.children(parent.key)
        return [child for child in children if not ChildInfo.is_delegate(child)]

    async def history(self, parent: Session, ref: str, limit: int) -> list[TranscriptEntry]:
        child = await self.child(parent, ref)
        return await self.store.transcripts.load(child.key, child.epoch, limit)

    async def stop(self, parent: Session, ref: str) -> list[ChildStopped]:
        """Stop one child's turn, or every child's for ``all``, each with its whole family
        below (as ``/subagents stop`` does): no grandchild keeps working for a stopped child."""
        if ref.strip().lower() == "all":
            targets = await self._children(parent)
        else:
            targets = [await self.child(parent, ref)]
        reports = []
        for child in targets:
            stopped = await stop_family(self.scheduler.stop, self.store.sessions, child.key)
            reports.append(
                ChildStopped(child_id_of(child.key) or child.key, stopped.turn, stopped.descendants)
            )
        return reports
