"""How a scripted model (``clawbot.testing``) streams: the chunks litellm reads from a custom
provider, and the :class:`StreamPace` that lets them out when a test says."""

from __future__ import annotations

import asyncio
from typing import Any


class StreamPace:
    """Lets a scripted model's streamed chunks out when a test says, never by the clock:
    each chunk waits for a permit (``allow``), or none once ``release`` let all through.

        pace = StreamPace()
        model = ScriptedModel(["Hello world"], chunk_size=5, pace=pace)
        pace.allow(1)
        await pace.held()  # "Hello" was handed to the caller; the rest waits
    """

    def __init__(self) -> None:
        self._permits = 0
        self._open = False
        self._granted = asyncio.Event()
        self._held = asyncio.Event()
        self.chunks = 0
        """Chunks let out so far."""

    def allow(self, chunks: int = 1) -> None:
        """Let ``chunks`` more chunks out."""
        self._permits += chunks
        self._held.clear()
        self._granted.set()

    def release(self) -> None:
        """Let every chunk out from now on."""
        self._open = True
        self._held.clear()
        self._granted.set()

    async def held(self) -> None:
        """Return once a stream waits for a permit: the chunks allowed so far were handed
        over (and read: the caller asked for the next one)."""
        await self._held.wait()

    async def next_chunk(self) -> None:
        """Awaited by the stream before each chunk."""
        while not self._open and self._permits == 0:
            self._granted.clear()
            self._held.set()
            await self._granted.wait()
        if not self._open:
            self._permits -= 1
        self.chunks += 1
        await asyncio.sleep(0)  # as a chunk from the network: others run between


def text_chunks(text: str, size: int) -> list[str]:
    """``text`` cut every ``size`` characters."""
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def tool_call_delta(
    index: int, call_id: str | None, name: str | None, arguments: str
) -> dict[str, Any]:
    """One piece of tool call ``index``: its id and name come with the first only."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
        "index": index,
    }


def chunk(
    text: str,
    *,
    tool_use: dict[str, Any] | None = None,
    finished: str = "",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One chunk in the shape litellm reads from a custom provider (``GenericStreamingChunk``)."""
    return {
        "text": text,
        "tool_use": tool_use,
        "is_finished": bool(finished),
        "finish_reason": finished,
        "usage": usage,
        "index": 0,
    }
