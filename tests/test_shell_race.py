"""No shell command leaves the workspace through a folder swapped for a link.

The shell checks its folders, then runs: bubblewrap mounts the session's reach, the command
starts in its working folder. Whoever may write the folder above (a subagent's shell, beside
its parent) can swap a checked folder for a link to anywhere in between; mounted or entered
again by name, the link would be followed, and the command would read, list and write the
folder outside (the old code did). Here a process swaps, as fast as it can, an agent's folder
(``agents/coder``) or a working folder (``d``) with a link to a folder outside, while
``shell_exec`` runs ``ls``, ``cat`` and ``touch`` there: nothing of the folder outside may be
read, listed, written or created.

Each runs twice, as the file race tests do: with ``openat2`` and with the walk one name at a
time that stands in where the kernel lacks it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawbot.security.reach import Reach, Root
from clawbot.tools.sandbox import Bubblewrap

from .shell_calls import run
from .spawned import spawn
from .test_file_race import NO_LEAKS, OUTSIDE, OUTSIDE_ONLY, SWAPPER, Race, resolution
from .test_shell_tool import SANDBOX, needs_bwrap

__all__ = ["resolution"]  # the fixture, shared with the file race tests

CALLS = 150
"""Calls per test and resolution: the old code leaked through about half of the sandboxed
calls it let run, and through a third of the host ones."""
MORE_CALLS = 1500
"""Calls at most, when none of the first CALLS ran inside: on a loaded machine the swapper
can win every one of them, and a race that never ran inside proves nothing."""
INSIDE = "inside text"
CODER = Reach((Root("agents/coder", write=True),), home="agents/coder")
"""A subagent's reach: its own folder, which the swapper swaps."""


def lay_out(workspace: Path, outside: Path, folder: str) -> Race:
    """The workspace with ``folder`` in it (and a ``.swap`` link beside it to ``outside``),
    each holding a ``secret.txt``; ``outside`` also a file of its own."""
    (workspace / folder).mkdir(parents=True)
    (workspace / folder / "secret.txt").write_text(INSIDE)
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE)
    (outside / OUTSIDE_ONLY).write_text(OUTSIDE)
    os.symlink(outside, workspace / f"{folder}.swap")
    race = Race(workspace, outside, {})
    race.before = race.snapshot()
    return race


async def swapped(race: Race, folder: str) -> AsyncIterator[Race]:
    process = await spawn(
        sys.executable, "-c", SWAPPER, str(race.workspace), folder, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    assert await process.stdout.readline() == b"swapping\n"
    yield race
    process.kill()
    await process.wait()


@pytest.fixture
async def agent_folder_swapped(tmp_path: Path, spawned_processes: None) -> AsyncIterator[Race]:
    """``agents/coder`` swapped with a link to the folder outside."""
    race = lay_out(tmp_path / "ws", tmp_path / "outside", "agents/coder")
    async for running in swapped(race, "agents/coder"):
        yield running


@pytest.fixture
async def working_folder_swapped(tmp_path: Path, spawned_processes: None) -> AsyncIterator[Race]:
    """``d`` swapped with a link to the folder outside."""
    race = lay_out(tmp_path / "ws", tmp_path / "outside", "d")
    async for running in swapped(race, "d"):
        yield running


def command(number: int) -> str:
    return ("ls", "cat secret.txt", f"touch made-{number}")[number % 3]


def ran(race: Race) -> bool:
    """Whether some calls ran in the folder inside (so the race was run, not refused)."""
    return any(not failed and INSIDE in content for content, failed in race.results)


@needs_bwrap
async def test_a_sandbox_never_mounts_a_folder_swapped_for_a_link_out(
    agent_folder_swapped: Race, resolution: str
) -> None:
    """The sandbox mounts the agent's folder as it was opened and checked, never by name."""
    race = agent_folder_swapped
    assert isinstance(SANDBOX, Bubblewrap)

    for number in range(MORE_CALLS):
        content, is_error = await run(race.workspace, command(number), sandbox=SANDBOX, reach=CODER)
        race.account(None, content, is_error)
        if number + 1 >= CALLS and ran(race):
            break

    assert race.leaks.count() == NO_LEAKS, str(race.leaks)
    assert ran(race)


async def test_a_host_command_never_starts_in_a_working_folder_swapped_for_a_link_out(
    working_folder_swapped: Race, resolution: str
) -> None:
    """On the host (the operator's opt-in) the command starts in the folder opened and
    checked, never entered again by name."""
    race = working_folder_swapped

    for number in range(MORE_CALLS):
        content, is_error = await run(race.workspace, command(number), cwd="d")
        race.account(None, content, is_error)
        if number + 1 >= CALLS and ran(race):
            break

    assert race.leaks.count() == NO_LEAKS, str(race.leaks)
    assert ran(race)
