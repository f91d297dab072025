"""The intake journal's file: an accepted message made durable by one append to a file (and its
turn's answer by another, while the message is still only here), so turns reach SQLite a
hundred to a commit instead of with two commits each.

A message must be durable before the model sees it (nothing lost) and the answer before the
user does. SQLite's commit is the costliest step of a turn next to the model call, and each
of the two used to take a commit of its own. One line appended to this file keeps
the same promise as a WAL commit with ``synchronous=NORMAL``: it survives the process, not a
power cut (``FULL`` adds an fsync, as it does to SQLite's commit). The store writes the
journalled rows in its next transaction, whatever that is, and before any read, so nothing
ever reads around them.

Each process appends to a journal of its own and holds an exclusive ``flock`` on it while
it lives. A journal nobody holds belongs to a process that died; whoever opens the store
next (or a live peer's housekeeping) writes the rows it still lacks and deletes it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from pydantic_core import PydanticSerializationError, to_json

from clawbot.store.rows import JobRow, LedgerKey, LedgerRow, MessageRow

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no journal, every intake commits at once
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)
RESET_AT = 1024 * 1024
"""Bytes after which a journal whose rows are all stored starts over from empty."""
_SUFFIX = ".intake-"
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _line(record: list[Any]) -> bytes:
    """One journal line. Three are written a turn, so pydantic-core's encoder writes it
    (0.85 µs, against 2.7 µs through the json module's Python wrapper); a text it cannot
    encode as UTF-8 (a lone surrogate, in an error message say) goes through the json
    module, which escapes it. Both are JSON the replay reads alike."""
    try:
        return to_json(record) + b"\n"
    except PydanticSerializationError:
        return (_encode(record) + "\n").encode()


class Finish(NamedTuple):
    """How a turn whose message is still only in the journal ended: the transcript rows it
    added (the answer last), its status and error, and when. A named tuple, like the rows
    it carries (see :class:`Intake`)."""

    rows: tuple[MessageRow, ...]
    status: str
    error: str | None
    at: str

    def line(self, job_id: str) -> bytes:
        return _line(["finish", job_id, self.rows, self.status, self.error, self.at])


class Intake(NamedTuple):
    """The rows one accepted message adds: its dedup ledger row (for a platform message),
    its transcript row, its TurnJob row (without the message's row id, known only once
    stored), the ids of earlier jobs whose replies went out since and, once its turn ended
    before any of this reached SQLite, how it ended. A named tuple: two are built a turn,
    and one costs 40 % of a frozen dataclass, which sets each field through
    ``object.__setattr__`` (3,700 instructions against 9,400)."""

    ledger: LedgerRow | None
    message: MessageRow
    job: JobRow
    replied: tuple[str, ...] = ()
    finish: Finish | None = None

    @property
    def job_id(self) -> str:
        return self.job.id

    @property
    def seen_key(self) -> LedgerKey | None:
        """(channel, chat id, platform message id), the dedup ledger's key."""
        ledger = self.ledger
        return (ledger.channel, ledger.chat_id, ledger.message_id) if ledger is not None else None

    def line(self) -> bytes:
        return _line([self.ledger, self.message, self.job, self.replied])

    def finished(self, finish: Finish) -> Intake:
        """This intake, its turn ended as ``finish`` says. Built field by field: once a
        turn, and ``_replace`` takes longer (it walks the fields by name)."""
        return Intake(self.ledger, self.message, self.job, self.replied, finish)

    @classmethod
    def from_record(cls, record: list[Any]) -> Intake:
        ledger, message, job, replied = record
        return cls(
            ledger=LedgerRow(*ledger) if ledger is not None else None,
            message=MessageRow(*message),
            job=JobRow(*job),
            replied=tuple(replied),
        )


def replied_line(job_id: str) -> bytes:
    """The record that a finished turn's reply went out: appended the moment it was sent,
    so a crash before the mark reaches SQLite does not send the reply a second time."""
    return _line(["replied", job_id])


def supported() -> bool:
    """Journals need ``flock`` to tell a live owner from a dead one (not on Windows)."""
    return fcntl is not None


class _LockedFile:
    """A journal this process holds the lock of: the lock goes with the descriptor."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    def delete(self) -> None:
        """Its rows are all stored: delete and close it."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self._fd)

    def release(self) -> None:
        """Close it and keep it (unlocked) for the next start, or attempt, to replay."""
        os.close(self._fd)


class IntakeJournal(_LockedFile):
    """This process's journal file, locked for as long as it is open."""

    def __init__(self, path: Path, fd: int, *, sync: bool) -> None:
        super().__init__(path, fd)
        self._sync = sync
        self._size = 0

    @classmethod
    def create(cls, database: Path, *, sync: bool) -> IntakeJournal:
        """A new, locked journal next to the database. It is locked under a name no
        replayer looks for and then renamed, so no other process can take a journal for
        an orphan in the moment between its creation and its lock."""
        assert fcntl is not None
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        hidden = database.with_name(f".{database.name}{_SUFFIX}{tag}")
        path = database.with_name(f"{database.name}{_SUFFIX}{tag}")
        fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(hidden, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(hidden)
            raise
        return cls(path, fd, sync=sync)

    def append(self, data: bytes) -> None:
        """Make one record durable: one ``write`` (and an fsync under ``sync``)."""
        written = os.write(self._fd, data)
        if written != len(data):  # a full disk: never leave half a record behind
            os.ftruncate(self._fd, self._size)
            raise OSError(f"the intake journal {self.path} took {written} of {len(data)} bytes")
        self._size += written
        if self._sync:
            os.fsync(self._fd)

    def stored(self) -> None:
        """Every intake appended so far is in the database: once the file is big enough to
        matter, it starts over."""
        if self._size >= RESET_AT:
            os.ftruncate(self._fd, 0)
            self._size = 0


class Orphan(_LockedFile):
    """A dead process's journal and what it holds, locked by this process while in hand."""

    def __init__(
        self, path: Path, fd: int, intakes: list[Intake], replied: tuple[str, ...] = ()
    ) -> None:
        super().__init__(path, fd)
        self.intakes = intakes
        self.replied = replied


def orphans(database: Path) -> Iterator[Orphan]:
    """The journals next to ``database`` whose process is gone, each locked while in hand."""
    if fcntl is None or not database.parent.is_dir():
        return
    prefix = f"{database.name}{_SUFFIX}"  # matched as text: the name may hold glob characters
    names = sorted(entry.name for entry in os.scandir(database.parent))
    for path in (database.parent / name for name in names if name.startswith(prefix)):
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # another process replayed it just now
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # its process is alive
        try:
            if not path.exists():  # replayed and deleted between our glob and our lock
                os.close(fd)
                continue
            intakes, replied = _read(path, fd)
        except BaseException:
            os.close(fd)
            raise
        yield Orphan(path, fd, intakes, replied)


def _read(path: Path, fd: int) -> tuple[list[Intake], tuple[str, ...]]:
    """The intakes a journal holds, and the jobs whose replies it says went out."""
    with os.fdopen(os.dup(fd), "rb") as file:
        lines = file.read().splitlines()
    intakes: dict[str, Intake] = {}
    replied: list[str] = []
    for number, line in enumerate(lines, 1):
        try:
            match json.loads(line):
                case ["replied", job_id]:
                    replied.append(str(job_id))
                case ["finish", job_id, rows, status, error, at]:
                    intake = intakes[job_id]
                    finish = Finish(tuple(MessageRow(*row) for row in rows), status, error, at)
                    intakes[job_id] = intake.finished(finish)
                case record:
                    intake = Intake.from_record(record)
                    intakes[intake.job_id] = intake
        except (ValueError, TypeError, KeyError):
            # Only a power cut mid-append can leave a torn line, and only as the last one.
            log.warning("skipped a torn record (line %d) in the intake journal %s", number, path)
    return list(intakes.values()), tuple(replied)
