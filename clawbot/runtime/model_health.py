"""Which models are down: a model that failed in a way another model may not (an outage, a
timeout, a 429 after the retries, a rejected key, a spent quota) rests for a cooldown, and
the calls that list fallbacks go to the next model meanwhile.

The cooldown doubles at each failure in a row, up to a maximum, and is at least what the
provider asked for (a 429's ``retry-after``). A model that answers ends its outage; each
outage has a number, so the person is told once per outage rather than once per message.
Time comes from the injected clock: tests move it instead of waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from clawbot.clock import Clock, SystemClock

log = logging.getLogger("clawbot.llm")


@dataclass(frozen=True)
class Outage:
    """A model's current outage: since when, why (a phrase a person can read, never the
    provider's text or a key), how many failures in a row, and until when it rests."""

    model: str
    number: int
    """Which outage of this model since the process started (1, 2, ...)."""
    since: datetime
    reason: str
    failures: int
    resting_until: float
    """On the clock's monotonic scale."""
    retry_at: datetime
    """The same moment as wall-clock time, for people."""


class ModelHealth:
    """The outages of the models this process calls, shared by every call."""

    def __init__(
        self,
        *,
        cooldown: float = 60.0,
        cooldown_max: float = 900.0,
        clock: Clock | None = None,
    ) -> None:
        self.cooldown = cooldown
        self.cooldown_max = max(cooldown_max, cooldown)
        self.clock = clock or SystemClock()
        self._outages: dict[str, Outage] = {}
        self._numbers: dict[str, int] = {}

    def outage(self, model: str) -> Outage | None:
        """The model's outage, from its first failure until it answers again."""
        return self._outages.get(model)

    def resting(self, model: str) -> bool:
        """Whether the model is in its cooldown (not to be tried while another can be)."""
        outage = self._outages.get(model)
        return outage is not None and self.clock.monotonic() < outage.resting_until

    def order(self, chain: Sequence[str]) -> tuple[str, ...]:
        """The models of ``chain`` a call tries, in order: those not resting; when every
        one rests, the one whose rest ends first (a call is never refused untried)."""
        ready = tuple(model for model in chain if not self.resting(model))
        if ready:
            return ready
        return (min(chain, key=lambda model: self._outages[model].resting_until),)

    def failed(self, model: str, reason: str, retry_after: float | None = None) -> Outage:
        """Record a failure: the model rests for the cooldown, doubled for each failure in
        a row before it (at most the maximum), or as long as the provider asked."""
        now, mono = self.clock.now(), self.clock.monotonic()
        current = self._outages.get(model)
        failures = current.failures + 1 if current else 1
        rest = min(self.cooldown * 2 ** (failures - 1), self.cooldown_max)
        if retry_after is not None:
            rest = max(rest, retry_after)
        if current is None:
            number = self._numbers[model] = self._numbers.get(model, 0) + 1
            since = now
        else:
            number, since = current.number, current.since
        outage = Outage(
            model=model,
            number=number,
            since=since,
            reason=reason,
            failures=failures,
            resting_until=mono + rest,
            retry_at=now + timedelta(seconds=rest),
        )
        self._outages[model] = outage
        return outage

    def answered(self, model: str) -> None:
        """The model answered: its outage, if it had one, is over."""
        ended = self._outages.pop(model, None)
        if ended is not None:
            log.info("%s answers again (it was unavailable: %s)", model, ended.reason)
