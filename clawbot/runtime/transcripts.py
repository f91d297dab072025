"""In-memory tails of session transcripts, so a turn never re-reads or re-encodes history.

The store is the source of truth; this cache holds, per session, the wire form (OpenAI-format
dicts) of the most recent entries, appended as turns produce them. Its cost per turn stays
flat however long a conversation grows.

It keeps plain dicts, strings and ints rather than the entries themselves. A cached entry
lives for the whole conversation: as a model it was about eight objects the garbage collector
tracks, while a text entry's wire dict holds only strings and is not tracked at all, which
keeps the collector's full passes rare and short.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clawbot.lru import LRUCache
from clawbot.messages import AttachmentBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.llm import entry_to_wire
from clawbot.store import Store


@dataclass(frozen=True)
class Attached:
    """A held message that came with files: its wire form (the very dict the history
    holds, so a request's copy of the history finds it by identity), the turn it belongs
    to and the files, as references."""

    message: dict[str, Any]
    turn_id: str | None
    files: tuple[AttachmentBlock, ...]


class Transcript:
    """The recent history of one session epoch: entry ``i`` is the wire messages
    ``messages[starts[i]:starts[i + 1]]``, said by ``roles[i]`` in turn ``turn_ids[i]``.
    The few messages that came with files are also listed (``attached``)."""

    __slots__ = (
        "_attached",
        "_messages",
        "_roles",
        "_starts",
        "_summary",
        "_turn_ids",
        "epoch",
        "keep",
    )

    def __init__(self, epoch: int, keep: int, summary: str | None = None) -> None:
        self.epoch = epoch
        self.keep = keep
        self._messages: list[dict[str, Any]] = []
        self._starts: list[int] = []
        self._roles: list[str] = []
        self._turn_ids: list[str | None] = []
        self._attached: list[tuple[int, Attached]] = []  # (message index, what it carried)
        self._summary = summary_message(summary)

    @property
    def summary(self) -> str | None:
        """The summary of the compacted part of the conversation, as the model sees it."""
        if self._summary is None:
            return None
        return str(self._summary["content"]).removeprefix(SUMMARY_HEAD)

    def restart(self, summary: str | None, entries: Iterable[TranscriptEntry]) -> None:
        """Hold ``entries`` under ``summary`` instead of what it held: a compaction
        changed what the model sees. In place, so a running turn that holds this
        transcript sees it from its next model call on."""
        self._summary = summary_message(summary)
        self._messages.clear()
        self._starts.clear()
        self._roles.clear()
        self._turn_ids.clear()
        self._attached.clear()
        self.append(entries)

    def __len__(self) -> int:
        """Entries held (the most recent ones; older ones are only in the store)."""
        return len(self._roles)

    def append(self, entries: Iterable[TranscriptEntry]) -> None:
        for entry in entries:
            start = len(self._messages)
            self._starts.append(start)
            self._messages.extend(entry_to_wire(entry))
            self._roles.append(entry.role)
            self._turn_ids.append(entry.turn_id)
            files = entry.attachments if entry.role == "user" else ()
            if files:
                held = Attached(self._messages[start], entry.turn_id, files)
                self._attached.append((start, held))
        excess = len(self._roles) - self.keep
        if excess > self.keep:
            offset = self._starts[excess]
            del self._messages[:offset]
            self._starts = [start - offset for start in self._starts[excess:]]
            del self._roles[:excess]
            del self._turn_ids[:excess]
            if self._attached:
                self._attached = [(i - offset, a) for i, a in self._attached if i >= offset]

    def attached(self) -> list[Attached]:
        """The held messages that came with files, oldest first."""
        return [held for _, held in self._attached]

    def tail(self, count: int) -> list[dict[str, Any]]:
        """Wire messages of the last ``count`` entries, starting at a user message so tool
        results are never separated from the call that asked for them."""
        roles = self._roles
        start = max(0, len(roles) - count)
        while start < len(roles) and roles[start] != "user":
            start += 1
        if start == len(roles):
            return [] if self._summary is None else [self._summary]
        if self._summary is None:
            return self._messages[self._starts[start] :]
        return [self._summary, *self._messages[self._starts[start] :]]

    def user_text(self, turn_id: str) -> str:
        """What the person said in turn ``turn_id`` (its user messages, joined)."""
        ends = [*self._starts[1:], len(self._messages)]
        return "\n".join(
            str(message["content"] or "")
            for role, owner, start, end in zip(
                self._roles, self._turn_ids, self._starts, ends, strict=True
            )
            if role == "user" and owner == turn_id
            for message in self._messages[start:end]
        )


class TranscriptCache:
    """The transcripts of the ``max_sessions`` most recently active sessions.

    Dropping one is always safe: every entry reaches the store before it is appended here,
    so a session that speaks again reads its history back. A turn keeps appending to the
    copy it holds; nobody else reads that session's transcript until the turn ends (the
    scheduler runs one turn per session and holds its other messages back)."""

    def __init__(self, store: Store, *, keep: int, max_sessions: int = 10_000) -> None:
        self._store = store
        self._keep = keep
        self._items: LRUCache[str, Transcript] = LRUCache(max_sessions)

    def __len__(self) -> int:
        """Sessions whose transcript is cached."""
        return len(self._items)

    async def get(self, session: Session) -> Transcript:
        item = self._items.get(session.key)
        if item is not None and item.epoch == session.epoch:
            return item
        live = await self._store.transcripts.live(session.key, session.epoch, self._keep)
        transcript = Transcript(epoch=session.epoch, keep=self._keep, summary=live.summary)
        transcript.append(stored.entry for stored in live.entries)
        # Another caller may have loaded (and appended to) this session meanwhile: the first
        # copy cached wins, so every writer appends to the same one.
        item = self._items.get(session.key)
        if item is not None and item.epoch == session.epoch:
            return item
        self._items.put(session.key, transcript)
        return transcript

    def started(self, session: Session) -> None:
        """``session`` was created just now, so its transcript is empty: cached as such,
        with no read of the store for its first turn (a round trip on PostgreSQL)."""
        item = self._items.get(session.key)
        if item is None or item.epoch != session.epoch:
            self._items.put(session.key, Transcript(epoch=session.epoch, keep=self._keep))

    def forget(self, key: str) -> None:
        self._items.pop(key)

    async def reload(self, session: Session, *held: Transcript) -> None:
        """Read what the model sees of ``session`` afresh into its cached transcript and
        the ``held`` ones (a running turn's), after a compaction changed it."""
        live = await self._store.transcripts.live(session.key, session.epoch, self._keep)
        cached = self._items.get(session.key)
        for transcript in {id(t): t for t in (cached, *held) if t is not None}.values():
            if transcript.epoch == session.epoch:
                transcript.restart(live.summary, (stored.entry for stored in live.entries))


SUMMARY_HEAD = "Summary of the earlier part of this conversation (compacted):\n"


def summary_message(summary: str | None) -> dict[str, Any] | None:
    """The wire message a compaction's summary is to the model: context placed before
    the messages kept verbatim."""
    return None if summary is None else {"role": "system", "content": SUMMARY_HEAD + summary}
