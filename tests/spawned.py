"""Processes the edge tests start (``clawbot run`` against the stand-ins), and their end.

A test that fails half-way (an assertion, a timeout) never reaches its own SIGTERM, and its
bot would go on running for the rest of the suite, holding ports and CPU. So the edge tests
start processes only through :func:`spawn`, and the ``spawned_processes`` fixture
(tests/conftest.py) kills and reaps whatever is still running when the test ends.
"""

from __future__ import annotations

import asyncio
import contextlib
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
