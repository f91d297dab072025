"""In-memory tails of session transcripts, so a turn never re-reads or re-encodes history.

The store is the source of truth; this cache holds, per session, the most recent entries and
their wire form (OpenAI-format dicts), appended as turns produce them. Its cost per turn stays
flat however long a conversation grows.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from clawbot.llm import entry_to_wire
from clawbot.messages import TranscriptEntry
from clawbot.sessions import Session
from clawbot.store import Store


@dataclass
class Transcript:
    """The recent history of one session epoch, with each entry's wire messages."""

    epoch: int
    keep: int
    entries: list[TranscriptEntry] = field(default_factory=list)
    wire: list[list[dict[str, Any]]] = field(default_factory=list)

    def append(self, entries: Iterable[TranscriptEntry]) -> None:
        for entry in entries:
            self.entries.append(entry)
            self.wire.append(entry_to_wire(entry))
        if len(self.entries) > 2 * self.keep:
            del self.entries[: -self.keep]
            del self.wire[: -self.keep]

    def tail(self, count: int) -> list[dict[str, Any]]:
        """Wire messages of the last ``count`` entries, starting at a user message so tool
        results are never separated from the call that asked for them."""
        start = max(0, len(self.entries) - count)
        while start < len(self.entries) and self.entries[start].role != "user":
            start += 1
        return [message for chunk in self.wire[start:] for message in chunk]


class TranscriptCache:
    """Bounded LRU of session transcripts (least recently used sessions are dropped)."""

    def __init__(self, store: Store, *, keep: int, max_sessions: int = 10_000) -> None:
        self._store = store
        self._keep = keep
        self._max_sessions = max_sessions
        self._items: OrderedDict[str, Transcript] = OrderedDict()

    async def get(self, session: Session) -> Transcript:
        item = self._items.get(session.key)
        if item is not None and item.epoch == session.epoch:
            self._items.move_to_end(session.key)
            return item
        transcript = Transcript(epoch=session.epoch, keep=self._keep)
        transcript.append(await self._store.load_transcript(session.key, session.epoch, self._keep))
        # Another caller may have loaded (and appended to) this session meanwhile: the first
        # copy cached wins, so every writer appends to the same one.
        item = self._items.get(session.key)
        if item is not None and item.epoch == session.epoch:
            return item
        self._items[session.key] = transcript
        if len(self._items) > self._max_sessions:
            self._items.popitem(last=False)
        return transcript

    def forget(self, key: str) -> None:
        self._items.pop(key, None)
