"""What a person sees of model fallbacks: one notice per outage in their chat when a
fallback model takes over from the turn's own, and in ``/status`` which model gave the
last answer and whether the turn's model is down.

The switch itself happens inside the model client (``clawbot.runtime.llm``), call by
call; this plugin only watches the replies (``ModelReply.model``) and tells.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from clawbot.channels.outbox import Outbox
from clawbot.lru import LRUCache
from clawbot.routing.sessions import Session
from clawbot.runtime.model_health import ModelHealth, Outage
from clawbot.runtime.plugins import ModelCallNext, TurnPlugin, TurnStart
from clawbot.runtime.replies import ModelReply

log = logging.getLogger("clawbot.llm")


def fallback_notice(outage: Outage, answering: str) -> str:
    return (
        f"{outage.model} {outage.reason}, so {answering} answers for now; "
        f"I go back to {outage.model} once it works again."
    )


class FallbackNotices(TurnPlugin):
    """Tells a chat once per outage that a fallback model answers it, and keeps which
    model answered each session last (for ``/status``)."""

    name = "fallbacks"

    def __init__(self, health: ModelHealth, outbox: Outbox, *, max_sessions: int = 10_000):
        self.health = health
        self.outbox = outbox
        self._answered: LRUCache[str, tuple[str, str]] = LRUCache(max_sessions)
        """session key -> (the model that answered last, the model the turn asked)"""
        self._told: LRUCache[str, tuple[str, int]] = LRUCache(max_sessions)
        """session key -> (the model, the number of its outage) the chat was told of"""

    async def around_model(self, turn: TurnStart, proceed: ModelCallNext) -> ModelReply:
        reply = await proceed()
        if not reply.model:
            return reply
        key = turn.session.key
        self._answered.put(key, (reply.model, turn.model))
        if reply.model != turn.model:
            outage = self.health.outage(turn.model)
            if outage is not None and self._told.get(key) != (outage.model, outage.number):
                self._told.put(key, (outage.model, outage.number))
                await self._tell(turn.session, fallback_notice(outage, reply.model))
        return reply

    async def status(self, session: Session) -> Sequence[str]:
        answered = self._answered.get(session.key)
        if answered is None:
            return ()
        model, asked = answered
        lines = []
        outage = self.health.outage(asked)
        if outage is not None:
            lines.append(
                f"{asked} is unavailable since {outage.since:%H:%M} UTC ({outage.reason}); "
                f"tried again from {outage.retry_at:%H:%M:%S} UTC"
            )
        lines.append(f"Last answer by: {model}" + (" (a fallback)" if model != asked else ""))
        return lines

    async def _tell(self, session: Session, text: str) -> None:
        delivery = await self.outbox.deliver(session.notice(text))
        if delivery.status == "failed":
            log.warning("could not tell %s about a fallback: %s", session.key, delivery.error)
