"""Approvals' part in a turn (a ``TurnPlugin``): a turn stopped while a call waited for a
person resumes at that call's round, a finished round's saved copy is dropped, and the
run's grants are revoked when it ends."""

from __future__ import annotations

import asyncio
from typing import Any

from clawbot.runtime.plugins import TurnPlugin, TurnStart
from clawbot.security.approvals import Approvals
from clawbot.security.paused_rounds import PausedRound


class ApprovalTurns(TurnPlugin):
    name = "approvals"

    def __init__(self, approvals: Approvals) -> None:
        self.approvals = approvals

    async def resume_round(self, turn: TurnStart) -> PausedRound | None:
        return await self.approvals.paused_round(turn.session, turn.turn_id)

    async def round_ended(self, turn: TurnStart) -> None:
        await self.approvals.round_ended(turn.turn_id)

    async def turn_ended(self, turn: TurnStart) -> None:
        await self.approvals.run_ended(turn.turn_id)

    def parked(self) -> set[asyncio.Task[Any]]:
        return self.approvals.parked()
