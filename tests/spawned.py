"""Processes the edge tests start (``clawbot run`` against the stand-ins), and their end.

A test that fails half-way (an assertion, a timeout) never reaches its own SIGTERM, and its
bot would go on running for the rest of the suite, holding ports and CPU. So the edge tests
start processes only through :func:`spawn`, and the ``spawned_processes`` fixture
(tests/conftest.py) kills and reaps whatever is still running when the test ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

REAP_TIMEOUT = 30.0
"""Seconds a SIGKILLed process may take to be reaped before it is left to the OS."""

_running: list[asyncio.subprocess.Process] = []


async def spawn(*command: str, **options: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec``, remembered for :func:`kill_leftovers`."""
    process = await asyncio.create_subprocess_exec(*command, **options)
    _running.append(process)
    return process


async def kill_leftovers() -> None:
    """SIGKILL and reap every spawned process that has not exited (no-op for the others)."""
    while _running:
        process = _running.pop()
        if process.returncode is not None:
            continue
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), REAP_TIMEOUT)


@dataclass(frozen=True)
class KillSeed:
    """Seeds where a kill test kills: each run draws a new one, a failure names it, and the
    environment variable ``variable`` set to it replays the same run."""

    variable: str
    value: int

    @classmethod
    def drawn(cls, variable: str) -> KillSeed:
        """The seed in ``variable`` when set (a replay), else a new one."""
        given = os.environ.get(variable)
        return cls(variable, int(given) if given else random.SystemRandom().randrange(2**32))

    def random(self, salt: str = "") -> random.Random:
        return random.Random(f"{self.value}/{salt}" if salt else self.value)

    def __str__(self) -> str:
        return f"kill seed {self.value}: replay with {self.variable}={self.value}"

    @contextlib.contextmanager
    def named(self) -> Iterator[None]:
        """Add the seed to whatever fails inside (an assertion, a timeout), for the replay."""
        try:
            yield
        except BaseException as failure:
            failure.add_note(str(self))
            raise
