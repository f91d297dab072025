"""Where a turn stands on its chain of agents: the hop and trace it inherits from the
injected messages it answers. Read by injection (``subagents``, to pass them on) and by the
tool gate (to file each tool call's audit record under its trace), so it lives in the lower
of the two; it needs nothing of the scheduler."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from clawbot.errors import MalformedMetaError
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.store.ids import new_id
from clawbot.subagents.records import (
    INJECTION_META,
    InjectionHeader,
    Trace,
    TraceStep,
    headers_of,
    parse_meta,
)

log = logging.getLogger("clawbot.subagents")


@dataclass(frozen=True)
class TurnOrigin:
    """Where a turn stands on its chain of agents: the hop and trace of the injected message
    it answers (the farthest travelled, when it answers several), or hop 0 and a new trace
    rooted in its own session for a turn that answers a person."""

    hop: int
    trace: Trace

    @classmethod
    def of(
        cls, session: Session, turn_id: str | None, inputs: Sequence[TranscriptEntry]
    ) -> TurnOrigin:
        best: InjectionHeader | None = None
        for meta in headers_of(inputs):
            value = meta.get(INJECTION_META)
            if value is None:
                continue
            try:
                header = parse_meta(InjectionHeader, value, "injection header")
            except MalformedMetaError as exc:
                log.warning("session %s: %s", session.key, exc)
                continue
            if best is None or header.hop > best.hop:
                best = header
        here = TraceStep(session_key=session.key, agent_id=session.agent_id)
        if best is None:
            return cls(hop=0, trace=Trace(trace_id=turn_id or new_id("trace"), path=(here,)))
        trace = best.trace
        if not trace.path or trace.path[-1].session_key != session.key:
            trace = trace.then(here)
        return cls(hop=best.hop, trace=trace)

    def onward(self, target_key: str, agent_id: str) -> tuple[int, Trace]:
        """The hop and trace of a message this turn sends on to a session (``target_key``,
        run by ``agent_id``)."""
        step = TraceStep(session_key=target_key, agent_id=agent_id)
        return self.hop + 1, self.trace.then(step)
