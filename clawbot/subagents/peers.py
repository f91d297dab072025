"""Peer groups: sessions of two agents message each other (``sessions_send`` to a session
that is not the sender's child) only when both agents are in one ``[peer_groups.<name>]``
of the settings. Everything else is refused with an error naming the groups.

A peer message is an injection like any other: hop, trace, idempotency key, the loop and
``max_hops`` rules. An answer to the peer whose message a turn answers travels back along
the trace (as a report does), so a conversation between two peers is bounded by
``max_hops``, while a message that would come round to a session already on its chain
(A>B>C>A) is refused. A subagent may not message a person's conversation this way: text from
an internal session reaches a platform only through the ``message`` tool.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from clawbot.agents.registry import AgentRegistry
from clawbot.errors import SubagentError
from clawbot.messages import INTERNAL_CHANNEL, Provenance
from clawbot.routing.sessions import Session
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.subagents.injection import TurnOrigin
from clawbot.subagents.records import ChildInfo, Injection

log = logging.getLogger("clawbot.subagents")

MAX_PEERS_LISTED = 20
"""``sessions_list`` names at most this many peer sessions (the newest)."""


@dataclass(frozen=True)
class PeerView:
    """A session ``sessions_send`` reaches as a peer: its key, its agent, the groups shared."""

    key: str
    agent_id: str
    groups: tuple[str, ...]


class PeerGroups:
    """The ``peer_groups`` setting, read: which groups hold an agent."""

    def __init__(self, settings: Settings) -> None:
        self._groups = {
            name: frozenset(group.agents) for name, group in settings.peer_groups.items()
        }

    def of(self, agent_id: str) -> tuple[str, ...]:
        """The names of the groups ``agent_id`` is in, sorted."""
        return tuple(sorted(name for name, agents in self._groups.items() if agent_id in agents))

    def shared(self, first: str, second: str) -> tuple[str, ...]:
        """The groups holding both agents: they are peers when this is not empty."""
        theirs = set(self.of(second))
        return tuple(name for name in self.of(first) if name in theirs)


class PeerMessages:
    """``sessions_send`` to a session that is not the sender's child."""

    def __init__(self, *, settings: Settings, store: Store, agents: AgentRegistry) -> None:
        self.groups = PeerGroups(settings)
        self.store = store
        self.agents = agents
        for name, group in settings.peer_groups.items():
            for agent_id in group.agents:
                if agents.find(agent_id) is None:  # may be created later: not an error
                    log.warning(
                        "peer group %r names agent %r, which does not exist", name, agent_id
                    )

    async def session(self, ref: str) -> Session | None:
        """The session ``ref`` names by its key, if there is one."""
        return await self.store.sessions.get(ref.strip())

    def message(
        self,
        sender: Session,
        target: Session,
        message: str,
        origin: TurnOrigin,
        turn_id: str | None,
    ) -> Injection:
        """The injection of ``message`` into the peer ``target``; a SubagentError names the
        rule that refuses it (the loop and hop rules are the injector's)."""
        self.check(sender, target)
        agent = self.agents.get(sender.agent_id)
        hop, trace = origin.onward(target.key, target.agent_id)
        path = origin.trace.path
        if len(path) >= 2 and path[-2].session_key == target.key:
            trace = origin.trace.back()  # an answer to the peer this turn answers
        digest = hashlib.sha256(message.encode()).hexdigest()[:16]
        key = f"peer:{sender.key}>{target.key}:{turn_id or '-'}:{digest}"
        return Injection(
            kind="message",
            target_key=target.key,
            source_key=sender.key,
            text=f"[@peer:{agent.name}#{agent.agent_id} session {sender.key}] {message}",
            provenance=Provenance(
                channel=INTERNAL_CHANNEL,
                sender_id=sender.key,
                sender_name=agent.name,
                message_id=key,
                source="internal",
            ),
            idempotency_key=key,
            hop=hop,
            trace=trace,
        )

    async def reachable(self, sender: Session, limit: int = MAX_PEERS_LISTED) -> list[PeerView]:
        """The peer sessions ``sender`` may message, newest first, at most ``limit``: those
        :meth:`check` allows, less its own children and delegates (which are not peers).
        Free for an agent in no peer group; otherwise it reads the sessions one by one."""
        if not self.groups.of(sender.agent_id):
            return []
        found: list[PeerView] = []
        for key in reversed(await self.store.sessions.keys()):
            if len(found) >= limit:
                break
            if key == sender.key:
                continue
            target = await self.store.sessions.get(key)
            if target is None or target.owner_key == sender.key:
                continue
            shared = self.groups.shared(sender.agent_id, target.agent_id)
            if not shared or not _may_reach(sender, target) or ChildInfo.is_delegate(target):
                continue
            found.append(PeerView(target.key, target.agent_id, shared))
        return found

    def check(self, sender: Session, target: Session) -> None:
        """Raise SubagentError unless ``sender`` may message ``target`` as a peer."""
        first, second = sender.agent_id, target.agent_id
        if not self.groups.shared(first, second):
            mine = ", ".join(self.groups.of(first)) or "none"
            theirs = ", ".join(self.groups.of(second)) or "none"
            raise SubagentError(
                f"{target.key!r} is not a child of this session, and agents {first} and "
                f"{second} are not peers: no peer group holds both (peer groups of {first}: "
                f"{mine}; of {second}: {theirs})",
                hint="message your own children, or ask the operator to put both agents in "
                "one [peer_groups.<name>] of clawbot.toml",
            )
        if not _may_reach(sender, target):
            raise SubagentError(
                f"a subagent cannot message a person's conversation ({target.key}), even a peer's",
                hint="report back to your parent, or use the message tool if you have it",
            )


def _may_reach(sender: Session, target: Session) -> bool:
    """Text from an internal session reaches no person's conversation, a peer's neither."""
    return sender.channel != INTERNAL_CHANNEL or target.channel == INTERNAL_CHANNEL
