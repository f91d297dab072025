"""Injection, the only way agents talk to each other: a message persisted in another
session with its provenance, hop count, trace and idempotency key, and that session's turn
scheduled (lane ``subagent`` for a child's input, ``announce`` for a report), like a
person's message through the router.

The loop rules are checked here, for every injection: no session sends to itself; a chain
of agents passes on at most ``max_hops`` messages; a message that would reach a session
already on its chain (A>B>C>A) is refused. A refusal is logged and raised as a
:class:`~clawbot.errors.SubagentError`, so the sender (a tool call) is told.
"""

from __future__ import annotations

import logging

from clawbot.errors import SubagentError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.scheduling.jobs import Lane
from clawbot.scheduling.records import TurnHandle
from clawbot.scheduling.scheduler import Scheduler
from clawbot.security.origin import TurnOrigin
from clawbot.settings import Settings
from clawbot.store import Store, new_id
from clawbot.subagents.records import (
    ChildInfo,
    Injection,
    InjectionWrite,
)

log = logging.getLogger("clawbot.subagents")

__all__ = ["Injector", "TurnOrigin"]


class Injector:
    def __init__(self, *, settings: Settings, store: Store, scheduler: Scheduler) -> None:
        self.settings = settings
        self.store = store
        self.scheduler = scheduler

    def check(self, injection: Injection) -> None:
        """Raise SubagentError (and log) when the loop rules refuse ``injection``."""
        chain = injection.trace.agents or injection.source_key
        if injection.source_key == injection.target_key:
            log.warning("refused a message from %s to itself", injection.source_key)
            raise SubagentError("a session cannot send a message to itself")
        if injection.hop > self.settings.max_hops:
            log.warning(
                "dropped a %s to %s at hop %d (max_hops %d), chain %s",
                injection.kind,
                injection.target_key,
                injection.hop,
                self.settings.max_hops,
                chain,
            )
            raise SubagentError(
                f"dropped: this chain of agents ({chain}) has passed on "
                f"{injection.hop - 1} messages, the limit (max_hops) is {self.settings.max_hops}",
                hint="stop messaging other agents and answer with what you have",
            )
        if injection.kind != "announce" and injection.trace.loops_back():
            log.warning("refused a loop: %s", chain)
            raise SubagentError(
                f"refused: this message would go round in a loop ({chain})",
                hint="answer with what you have instead",
            )

    async def inject(self, injection: Injection) -> TurnHandle | None:
        """Check, persist and schedule ``injection``; None when its idempotency key was
        stored before (or, for an announce, its child turn was reported already)."""
        self.check(injection)
        target = await self.store.sessions.get(injection.target_key)
        if target is None:
            raise SubagentError(f"there is no session {injection.target_key!r}")
        entry = TranscriptEntry(
            role="user",
            content=(TextBlock(text=injection.text),),
            provenance=injection.provenance,
            meta=injection.meta(),
            turn_id=new_id("turn"),
        )
        write = InjectionWrite(
            key=injection.idempotency_key,
            kind=injection.kind,
            source_key=injection.source_key,
            hop=injection.hop,
            # A delegate's answer is its parent's tool result: its turns owe no announce.
            parent_key=None if ChildInfo.is_delegate(target) else target.owner_key,
            announces=injection.announces,
        )
        lane: Lane = "announce" if injection.kind == "announce" else "subagent"
        handle = await self.scheduler.submit(target, entry, lane=lane, injection=write)
        if handle is None:
            log.info("%s %s was stored before", injection.kind, injection.idempotency_key)
        else:
            log.info(
                "%s from %s to %s (hop %d, chain %s)",
                injection.kind,
                injection.source_key,
                target.key,
                injection.hop,
                injection.trace.agents,
            )
        return handle
