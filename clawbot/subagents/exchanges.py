"""Peer exchanges: the reports of one background conversation between peer subagents reach
their owners together, once it has gone quiet, so one exchange costs the person at most one
reply.

Two peers that message each other back and forth (bounded by ``max_hops``) end a child turn
at every message, and each ended child turn reports to its owner: the owner's agent ran a
turn, and wrote the person a reply, for each of them. Instead, the child sessions that peer
messages pass between within one trace (everything a person's message set off) form an
exchange. A turn of one of them that ends while another still has a turn running or waiting
is held; the turn that leaves them all quiet releases every report held, one announce per
owner, which its agent answers in one turn.

Held in memory, as the running turns are: after a restart the reports held are unreported
turns, which start-up recovery reports one by one (nothing is lost; the person may then get
more than one reply for the exchange).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clawbot.routing.sessions import Session
from clawbot.subagents.records import ChildRun


@dataclass
class _Exchange:
    sessions: set[str] = field(default_factory=set)
    held: list[ChildRun] = field(default_factory=list)


class PeerExchanges:
    """The open exchanges by trace id: their child sessions, and the reports they hold."""

    def __init__(self) -> None:
        self._open: dict[str, _Exchange] = {}

    def joined(self, trace_id: str, *sessions: Session) -> None:
        """A peer message passed between ``sessions`` within trace ``trace_id``: the child
        sessions among them (a person's conversation reports to nobody) are in its
        exchange."""
        children = {session.key for session in sessions if session.owner_key is not None}
        if children:
            self._open.setdefault(trace_id, _Exchange()).sessions.update(children)

    def of(self, session_key: str) -> list[str]:
        """The open exchanges ``session_key`` is in (their trace ids), oldest first."""
        return [trace for trace, held in self._open.items() if session_key in held.sessions]

    def sessions(self, trace_id: str) -> frozenset[str]:
        held = self._open.get(trace_id)
        return frozenset(held.sessions) if held is not None else frozenset()

    def hold(self, trace_id: str, run: ChildRun) -> None:
        """Keep ``run``'s report until the exchange goes quiet."""
        self._open.setdefault(trace_id, _Exchange()).held.append(run)

    def close(self, trace_id: str) -> list[ChildRun]:
        """End the exchange: the reports it held, in the order their turns ended."""
        held = self._open.pop(trace_id, None)
        return held.held if held is not None else []
