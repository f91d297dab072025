"""Streaming's part in a turn: the model calls of a turn whose reply is shown while it is
written stream their text to it.

The turn runner opens the live reply (``Replies.live``) and lends it to this plug-in for
the turn (:meth:`StreamingTurns.showing`); the plug-in binds it around each of the turn's
model calls (``around_model``), where the model client finds it. The runtime names neither.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from clawbot.runtime.plugins import ModelCallNext, TurnPlugin, TurnStart
from clawbot.runtime.replies import ModelReply
from clawbot.runtime.text_stream import TextSink, streaming_to


class StreamingTurns(TurnPlugin):
    """Binds each streaming turn's sink around its model calls."""

    name = "streaming"

    def __init__(self) -> None:
        self._sinks: dict[str, TextSink] = {}

    @contextlib.contextmanager
    def showing(self, turn_id: str, sink: TextSink) -> Iterator[None]:
        """The model calls of turn ``turn_id`` stream to ``sink`` inside the block."""
        self._sinks[turn_id] = sink
        try:
            yield
        finally:
            self._sinks.pop(turn_id, None)

    async def around_model(self, turn: TurnStart, proceed: ModelCallNext) -> ModelReply:
        sink = self._sinks.get(turn.turn_id)
        if sink is None:
            return await proceed()
        with streaming_to(sink):
            return await proceed()
