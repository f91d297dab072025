"""Running one shell command as a child process: its output read as it comes and capped, and
everything it started ended when it ends, when its time is up, or when the turn is stopped.

Used by both ways the shell runs (``clawbot.tools.shell``): in bubblewrap, and on the host
through ``clawbot.tools.host_shell``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

READ_CHUNK = 64 * 1024
DRAIN_SECONDS = 2.0
"""How long the output of a finished command is still read (a pipe a stray process holds)."""
GONE_CHECKS, GONE_CHECK_SECONDS = 100, 0.01
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

RUNNING: set[int] = set()
"""The processes ``run_command`` started and has not yet reaped (asyncio reaps them): a
sweep for strays (``host_shell``) must leave them alone."""

AfterExit = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Outcome:
    """How a command ended: its exit code (None when it was killed at its timeout) and
    its output as returned."""

    exit_code: int | None
    output: str


class CappedOutput:
    """The first and the last ``limit // 2`` bytes of a stream, and how long it was."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - self.half)]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if self.total <= len(self.head) + len(self.tail):
            return head + self.tail.decode("utf-8", errors="replace")
        left_out = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {left_out:,} bytes left out of {self.total:,} ...]\n{tail}"


def clean_environment(home: str) -> dict[str, str]:
    """All a command inherits: nothing of clawbot's own environment (keys, tokens)."""
    return {"PATH": SAFE_PATH, "HOME": home, "LANG": "C.UTF-8"}


async def run_command(
    argv: list[str],
    *,
    cwd: str | None,
    env: dict[str, str],
    timeout: float,
    limit: int,
    pass_fds: Sequence[int] = (),
    after_exit: AfterExit | None = None,
) -> Outcome:
    """Run ``argv`` in a new session (its own process group), killing the whole group when
    it ends, when its time is up, or when the turn is stopped; ``after_exit`` then ends
    what left the group (``host_shell``'s sweep), before the rest of the output is read.

    The output goes to a pipe of our own rather than asyncio's: asyncio's ``wait()`` also
    waits for its pipes to close, which a background process left holding them would put
    off until the timeout."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            cwd=cwd,
            env=env,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    )
    try:
        process = await asyncio.shield(starting)
    except asyncio.CancelledError:
        os.close(read_fd)
        # Stopped while asyncio still set the process up: it may run already (and have
        # started others), and asyncio would kill only it, so its whole group ends first.
        with contextlib.suppress(Exception):
            started = await starting
            RUNNING.add(started.pid)
            try:
                await _end_group(started.pid, after_exit)
                await started.wait()
            finally:
                RUNNING.discard(started.pid)
        raise
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    RUNNING.add(process.pid)
    try:
        return await _watch(process, loop, read_fd, timeout, limit, after_exit)
    finally:
        RUNNING.discard(process.pid)


async def _watch(
    process: asyncio.subprocess.Process,
    loop: asyncio.AbstractEventLoop,
    read_fd: int,
    timeout: float,
    limit: int,
    after_exit: AfterExit | None,
) -> Outcome:
    stream = asyncio.StreamReader(limit=READ_CHUNK)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
    )
    output = CappedOutput(limit)
    reader = asyncio.create_task(_drain(stream, output))
    try:
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                await process.wait()
        except TimeoutError:
            timed_out = True
        finally:
            await _end_group(process.pid, after_exit)  # what it left running goes too
            await process.wait()
            if after_exit is not None:
                await after_exit()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
    finally:
        reader.cancel()
        transport.close()
    return Outcome(None if timed_out else process.returncode, output.text())


async def _drain(stream: asyncio.StreamReader, output: CappedOutput) -> None:
    while chunk := await stream.read(READ_CHUNK):
        output.add(chunk)


async def _end_group(pgid: int, sweep: AfterExit | None = None) -> None:
    """Kill the process group and wait, briefly, until it is gone: a killed process is not
    gone at once, and nothing the command started should run on after the call returns
    (a member that stays, such as a zombie nobody reaps, is given up on). ``sweep`` runs
    between the kills: it reaps the members reparented to clawbot, whose zombies would
    otherwise keep the group."""
    for _ in range(GONE_CHECKS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if sweep is not None:
            await sweep()
        await asyncio.sleep(GONE_CHECK_SECONDS)
