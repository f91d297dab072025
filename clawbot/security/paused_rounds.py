"""Paused rounds: the round of tool calls a turn waited in for a person's approval, saved
so that a restart resumes the turn at that very call.

A call that needs an approval pauses its turn in the middle of a round: the model's reply
with its tool calls, of which those before the waiting one already ran. The round is saved
with the request (``approvals.round_json``, masked like a transcript row). A turn resumed
after a restart continues from it: the model is not asked again for that step (a re-run
often makes another call, and the request the person was shown would then cover nothing),
the call that was shown runs once approved (or the model is given the denial), the calls
that ran before the restart are not run again, and the loop goes on as usual. Once the
round is in the transcript its saved copy is cleared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pydantic import ValidationError

from clawbot.errors import ClawbotError
from clawbot.messages import Frozen, ToolCallBlock, ToolResultBlock, TranscriptEntry
from clawbot.runtime.replies import ModelReply


class MalformedRoundError(ClawbotError):
    """A saved round could not be read back (the turn asks the model again instead)."""


class _SavedRound(Frozen):
    """The stored form of a paused round (JSON in ``approvals.round_json``)."""

    text: str
    tool_calls: tuple[ToolCallBlock, ...]
    usage: dict[str, int]
    cost_usd: float | None = None
    model: str = ""
    results: tuple[ToolResultBlock, ...]
    call_id: str


@dataclass(frozen=True)
class PausedRound:
    """A round saved with the approval request of its call ``call_id``: the model's
    ``reply`` and the ``results`` of the calls before that one, which already ran."""

    reply: ModelReply
    results: tuple[ToolResultBlock, ...]
    call_id: str
    request_id: str

    def to_json(self) -> str:
        return _SavedRound(
            text=self.reply.text,
            tool_calls=self.reply.tool_calls,
            usage=self.reply.usage,
            cost_usd=self.reply.cost_usd,
            model=self.reply.model,
            results=self.results,
            call_id=self.call_id,
        ).model_dump_json()

    @classmethod
    def from_json(cls, text: str, *, request_id: str) -> PausedRound:
        try:
            saved = _SavedRound.model_validate_json(text)
        except ValidationError as exc:
            raise MalformedRoundError(
                f"the round saved with approval {request_id} cannot be read: "
                f"{exc.error_count()} error(s)"
            ) from None
        if all(call.id != saved.call_id for call in saved.tool_calls):
            raise MalformedRoundError(f"the round saved with approval {request_id} lacks its call")
        reply = ModelReply(
            text=saved.text,
            tool_calls=saved.tool_calls,
            usage=saved.usage,
            cost_usd=saved.cost_usd,
            model=saved.model,
        )
        return cls(reply=reply, results=saved.results, call_id=saved.call_id, request_id=request_id)

    def ran_in(self, turn: Sequence[TranscriptEntry]) -> bool:
        """Whether the round is among its turn's stored entries already (it was stored, and
        the process stopped before its saved copy was cleared)."""
        return any(
            isinstance(block, ToolResultBlock) and block.tool_call_id == self.call_id
            for entry in turn
            if entry.role == "tool"
            for block in entry.content
        )


class ToolRound(NamedTuple):
    """A round as it runs: the model's ``reply`` and the ``results`` of its calls so far
    (the runtime's list, which grows as the round runs), and the saved round it resumes,
    if it does. What a call that must wait for a person saves with its request. (A named
    tuple: one is made per round of every turn, and it is the cheapest record to make.)"""

    reply: ModelReply
    results: Sequence[ToolResultBlock]
    resumed: PausedRound | None = None

    def paused_at(self, call: ToolCallBlock, request_id: str) -> PausedRound:
        """The round to save when ``call`` waits for request ``request_id``."""
        return PausedRound(
            reply=self.reply, results=tuple(self.results), call_id=call.id, request_id=request_id
        )

    def resumes(self, call: ToolCallBlock) -> str | None:
        """The id of the request ``call`` waited for before a restart, if it is that call."""
        if self.resumed is not None and self.resumed.call_id == call.id:
            return self.resumed.request_id
        return None
