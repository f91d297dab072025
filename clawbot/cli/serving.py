"""One serving process per SQLite database: ``clawbot chat`` and ``clawbot run`` hold a lock
on a file beside the database for as long as they serve. (On PostgreSQL several processes may
serve one database: see docs/postgres.md and ``clawbot.cli.leadership``.)

"One active turn per session" is kept by the scheduler in memory; two serving processes on
one home would each run turns of the same session and mix its messages. Refusing the second
one is simpler and clearer than coordinating them, so the second process says which one holds
the home and what to do instead. Operator commands (``pairing``, ``agents``, ``doctor``) do
not take the lock and work beside a running bot.

The lock is the kernel's ``flock``: it goes with the process, even one killed by SIGKILL, so a
crash never leaves a stale lock behind. The file's text (pid, command, start time) only
serves the message.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from clawbot.errors import ClawbotError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock; serving is not guarded there
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".serving"


class AlreadyServingError(ClawbotError):
    """Another clawbot process serves from the same database."""


@dataclass(frozen=True)
class Holder:
    """What the lock file says about the process that holds it."""

    pid: int | None
    command: str
    since: str

    @classmethod
    def parse(cls, text: str) -> Holder:
        fields = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
        pid = fields.get("pid", "")
        return cls(
            pid=int(pid) if pid.isdigit() else None,
            command=fields.get("command", ""),
            since=fields.get("since", ""),
        )

    def render(self) -> str:
        return f"pid={self.pid}\ncommand={self.command}\nsince={self.since}\n"


class ServingLock:
    """The held lock; ``release`` (or leaving the ``with`` block) frees it."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, database: Path, command: str) -> ServingLock:
        """Take the lock of ``database`` for ``command`` (``clawbot chat``, ``clawbot run``),
        or raise :class:`AlreadyServingError` naming the process that holds it."""
        path = database.with_name(database.name + SUFFIX)
        if fcntl is None:  # pragma: no cover
            return cls(path, None)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ClawbotError(
                f"cannot create the lock file {path}: {exc.strerror}",
                hint="make the home folder writable, or point CLAWBOT_HOME elsewhere",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder.parse(_read(fd))
            os.close(fd)
            raise _already_serving(holder, database) from None
        except BaseException:
            os.close(fd)
            raise
        me = Holder(
            pid=os.getpid(),
            command=command,
            since=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        with contextlib.suppress(OSError):  # the text is only for the message
            os.ftruncate(fd, 0)
            os.pwrite(fd, me.render().encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Free the lock. The file stays: deleting it could race a process that is
        taking it."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)

    def __enter__(self) -> ServingLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _read(fd: int) -> str:
    with contextlib.suppress(OSError):
        return os.pread(fd, 4096, 0).decode("utf-8", "replace")
    return ""


def _already_serving(holder: Holder, database: Path) -> AlreadyServingError:
    who = f"`{holder.command}`" if holder.command else "another clawbot"
    pid = f" (pid {holder.pid})" if holder.pid is not None else ""
    since = f", running since {holder.since}" if holder.since else ""
    return AlreadyServingError(
        f"{who}{pid} is already serving this home ({database.parent}){since}; two serving "
        "processes on one database would mix the turns of a conversation",
        hint="stop that one first, or give this one its own home with --home or CLAWBOT_HOME "
        "(pairing, agents and doctor work beside a running bot)",
    )
