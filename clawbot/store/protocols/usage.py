"""The repository of the usage ledger: one row per call to a paid model, and its totals."""

from __future__ import annotations

from typing import Protocol

from clawbot.runtime.usage import (
    UsageFilter,
    UsageGroup,
    UsageGrouping,
    UsageRecord,
    UsageTotals,
)


class UsageLedger(Protocol):
    """Every model, embedding, transcription and speech call (see ``clawbot.runtime.usage``)."""

    def record(self, record: UsageRecord) -> None:
        """Write one call's row with the store's next commit, without waiting for it (a
        read of the ledger writes the waiting rows first; a crash loses at most a second
        of them)."""
        ...

    async def totals(self, where: UsageFilter) -> UsageTotals:
        """What the calls ``where`` covers used, added up."""
        ...

    async def grouped(self, by: UsageGrouping, where: UsageFilter) -> list[UsageGroup]:
        """The totals of the calls ``where`` covers, one group per agent, model, root
        session or day, the most expensive first (by day: oldest first)."""
        ...

    async def rows(self, where: UsageFilter) -> list[UsageRecord]:
        """The calls ``where`` covers, oldest first."""
        ...
