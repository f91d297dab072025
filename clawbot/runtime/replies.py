"""What one model call produced: the record a turn works on and a paused round keeps
(below the store, so ``security.paused_rounds`` holds it without importing the client)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clawbot.messages import ToolCallBlock
from clawbot.runtime.usage import COST_META, USAGE_META


@dataclass(frozen=True)
class ModelReply:
    """What one model call produced, in provider-neutral blocks: its text and tool calls,
    the tokens it used, what it cost in US dollars (None for a model litellm has no
    price for) and the model that answered (a fallback's when the asked one was down;
    empty for a reply no model made now, such as a round saved before a restart)."""

    text: str
    tool_calls: tuple[ToolCallBlock, ...]
    usage: dict[str, int]
    cost_usd: float | None = None
    model: str = ""

    @property
    def meta(self) -> dict[str, Any]:
        """What the assistant entry keeps of the call: ``usage`` (its tokens, when the
        provider counted any) and ``cost_usd`` (when known)."""
        meta: dict[str, Any] = {}
        if self.usage and any(self.usage.values()):
            meta[USAGE_META] = self.usage
        if self.cost_usd is not None:
            meta[COST_META] = self.cost_usd
        return meta
