"""What ``clawbot chat`` reads: piped input a line at a time on a reader thread, and the
approval requests the typed lines may answer.

One reader owns the input. Piped, a daemon thread reads standard input (its file descriptor
directly, so a read left waiting when the chat ends holds no lock of Python's buffered stdin)
at most ``MAX_LINES_AHEAD`` lines ahead of what the chat took, and hands each line to the
event loop; the end of input is ``None``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from clawbot.messages import Action

MAX_LINES_AHEAD = 1000
"""Lines read ahead of the chat at most (a long piped file is not read into memory)."""
READ_SIZE = 65536

ANSWERS = {
    "o": " once",
    "once": " once",
    "y": " once",
    "yes": " once",
    "s": " session",
    "session": " session",
    "d": "/deny",
    "deny": "/deny",
    "n": "/deny",
    "no": "/deny",
}


def answer_command(text: str, actions: tuple[Action, ...]) -> str | None:
    """The command a typed answer to an approval request stands for: a short answer picks
    the matching button's command, a line starting with ``/`` is taken as typed; None when
    the answer means nothing here."""
    typed = text.strip()
    if typed.startswith("/"):
        return typed
    wanted = ANSWERS.get(typed.lower())
    if wanted is None:
        return None
    for action in actions:
        if action.command.endswith(wanted) or action.command.startswith(wanted):
            return action.command
    return None


@dataclass(frozen=True)
class OpenRequest:
    """An approval request shown in the chat and not answered yet: ``message_id`` is what
    the console called its message (the approval's answer edits it), ``request_id`` the id
    its commands carry."""

    message_id: str
    request_id: str
    actions: tuple[Action, ...]

    @classmethod
    def of(cls, message_id: str, actions: tuple[Action, ...]) -> OpenRequest:
        words = actions[0].command.split() if actions else []
        return cls(message_id, words[1].lower() if len(words) > 1 else "", actions)

    def answer(self, text: str) -> str | None:
        """The command ``text`` answers this request with: a short answer (o, s, d, yes,
        no...) or a typed ``/approve``/``/deny`` naming its id; None for anything else,
        which is a message or a command like any other."""
        typed = text.strip()
        if typed.startswith("/"):
            words = typed.split()
            named = words[1].lower() if len(words) > 1 else ""
            if words[0].lower() in ("/approve", "/deny") and named == self.request_id:
                return typed
            return None
        return answer_command(typed, self.actions)

    @property
    def prompt(self) -> str:
        return f"answer {self.request_id}: o = once, s = for this session, d = deny › "


class LineReader:
    """Reads ``stream`` on a daemon thread and calls ``deliver`` on ``loop`` with each line
    (bytes, its newline kept) and finally with ``None``. ``taken`` frees room for one more
    line ahead; ``close`` stops it (a read already waiting is left to the thread)."""

    def __init__(
        self,
        stream: BinaryIO,
        deliver: Callable[[bytes | None], None],
        loop: asyncio.AbstractEventLoop,
        *,
        ahead: int = MAX_LINES_AHEAD,
    ) -> None:
        self._stream = stream
        self._deliver = deliver
        self._loop = loop
        self._room = threading.Semaphore(ahead)
        self._closed = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="clawbot-chat-input", daemon=True).start()

    def taken(self) -> None:
        self._room.release()

    def close(self) -> None:
        self._closed.set()
        self._room.release()

    def _run(self) -> None:
        for raw in self._lines():
            self._room.acquire()
            if self._closed.is_set() or not self._hand(raw):
                return
        self._hand(None)

    def _hand(self, raw: bytes | None) -> bool:
        if self._closed.is_set():
            return False
        try:
            self._loop.call_soon_threadsafe(self._deliver, raw)
        except RuntimeError:  # the loop is closed: the chat has ended
            return False
        return True

    def _lines(self) -> Iterator[bytes]:
        fileno: int | None = None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fileno = self._stream.fileno()
        if fileno is None:  # an in-memory stream (tests)
            return iter(self._stream.readline, b"")
        return _Lines(fileno, self._closed)


class _Lines(Iterator[bytes]):
    """The lines of a file descriptor, read with ``os.read`` (a line may be any length)."""

    def __init__(self, fileno: int, closed: threading.Event) -> None:
        self._fileno = fileno
        self._closed = closed
        self._pending = b""
        self._ended = False

    def __next__(self) -> bytes:
        while True:
            end = self._pending.find(b"\n")
            if end >= 0:
                line, self._pending = self._pending[: end + 1], self._pending[end + 1 :]
                return line
            if self._ended or self._closed.is_set():
                if self._pending and not self._closed.is_set():
                    line, self._pending = self._pending, b""
                    return line
                raise StopIteration
            try:
                chunk = os.read(self._fileno, READ_SIZE)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._ended = True
            self._pending += chunk
