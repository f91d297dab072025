"""What a turn is told while it runs (``TurnControl``: stop at the next safe tool boundary?)
and what it gives back (``TurnResult``), with the entries and notes the loop writes."""

from __future__ import annotations

from typing import Literal, NamedTuple

from clawbot.messages import Provenance, TextBlock, ToolCallBlock, ToolResultBlock, TranscriptEntry
from clawbot.runtime.replies import ModelReply

_BY_AGENT = Provenance(source="agent")  # immutable, so one instance serves every entry

REPEAT_WARN_AT = 2
REPEAT_STOP_AT = 3
EMPTY_REPLY = "(the model gave an empty answer — try rephrasing)"
ROUNDS_EXHAUSTED_NOTE = (
    "You have used all tool rounds for this turn. Do not call tools; answer the user now with "
    "what you have, and say what is left undone."
)
REPEAT_NOTE = (
    "You repeated an identical tool call several times. Stop calling tools and answer the user "
    "with what you have."
)
NOT_RUN_STEERED = "not run: interrupted by a newer message; resumes from the backlog"


class TurnControl:
    """The scheduler's seam into a running turn, asked at each safe tool boundary (before
    each tool call of an assistant message, and before the next model call) whether the
    turn should stop there. The default never stops a turn."""

    def should_yield(self) -> bool:
        return False

    def not_run_note(self) -> str:
        """The result given to tool calls a yielding turn did not start."""
        return NOT_RUN_STEERED


NEVER_YIELD = TurnControl()


class TurnResult(NamedTuple):
    """What a turn produced; ``reply`` is what the user should see. A named tuple: one is
    built every turn, and a frozen dataclass sets each field through
    ``object.__setattr__`` (about 1,300 instructions a field)."""

    turn_id: str
    status: Literal["done", "failed", "yielded"]
    reply: str
    rounds: int
    entries: tuple[TranscriptEntry, ...] = ()
    error: str | None = None
    refused_by: str | None = None
    """The spent budget that refused the turn's model call (BudgetExceededError.budget)."""


def assistant_entry(reply: ModelReply, turn_id: str, tools_offered: bool) -> TranscriptEntry:
    blocks: list[TextBlock | ToolCallBlock] = []
    if reply.text:
        blocks.append(TextBlock(text=reply.text))
    if tools_offered:
        blocks.extend(reply.tool_calls)
    return TranscriptEntry(
        role="assistant",
        content=tuple(blocks),
        provenance=_BY_AGENT,
        meta=reply.meta,
        turn_id=turn_id,
    )


def not_run(tool_call: ToolCallBlock, note: str) -> ToolResultBlock:
    return ToolResultBlock(
        tool_call_id=tool_call.id, name=tool_call.name, content=note, is_error=True
    )


def repeated(tool_call: ToolCallBlock) -> ToolResultBlock:
    return ToolResultBlock(
        tool_call_id=tool_call.id,
        name=tool_call.name,
        content="error: you already made this exact call in this turn; use its earlier result "
        "instead of repeating it",
        is_error=True,
    )
