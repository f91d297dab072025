"""A coordinator's scratchpad stays its folder while a link is swapped in for it.

A process swaps the session's scratchpad folder, as fast as it can, with a link to another
folder of the workspace that holds a full scratchpad's worth of files (``elsewhere``), while
the coordinator writes and lists notes. Checked once and then used again by name, the folder
would now and then be the link the second time: notes written into ``elsewhere``, its files
listed, or counted so that the scratchpad reads as full (the old code did all three).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clawbot.messages import ToolCallBlock
from clawbot.routing.sessions import Session
from clawbot.security.reach import Reach
from clawbot.settings import Settings
from clawbot.subagents.scratchpad import MAX_NOTES, folder_of, scratchpad_tools
from clawbot.tools.registry import ToolContext, ToolRegistry

from .spawned import spawn
from .test_file_race import SWAPPER, resolution

__all__ = ["resolution"]  # the fixture, shared with the file race tests

CALLS = 300
SESSION = Session(key="memory:chat1", channel="memory", chat_id="chat1", agent_id="coordinator")
ELSEWHERE = [f"elsewhere-{number}.md" for number in range(MAX_NOTES)]


@dataclass
class Swapped:
    workspace: Path
    folder: Path
    elsewhere: Path


@pytest.fixture
async def swapped(tmp_path: Path, spawned_processes: None) -> AsyncIterator[Swapped]:
    """The scratchpad folder (one note in it) swapped with a link to ``elsewhere``."""
    workspace = tmp_path / "ws"
    folder = workspace / folder_of(SESSION.key)
    folder.mkdir(parents=True)
    (folder / "mine.md").write_text("mine")
    elsewhere = workspace / "elsewhere"
    elsewhere.mkdir()
    for name in ELSEWHERE:
        (elsewhere / name).write_text("not a note")
    os.symlink(elsewhere, f"{folder}.swap")
    process = await spawn(
        sys.executable,
        "-c",
        SWAPPER,
        str(workspace),
        folder_of(SESSION.key),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert await process.stdout.readline() == b"swapping\n"
    yield Swapped(workspace, folder, elsewhere)
    process.kill()
    await process.wait()


async def test_notes_are_never_written_listed_or_counted_in_a_folder_swapped_in(
    swapped: Swapped, resolution: str
) -> None:
    """The coordinator's reach is the whole workspace here, so only the scratchpad's own
    confinement keeps its notes in its folder."""

    async def whole() -> Reach:
        return Reach.whole()

    ctx = ToolContext(
        session=SESSION,
        workspace=swapped.workspace,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
        reach=whole,
    )
    registry = ToolRegistry(scratchpad_tools())
    results = []
    for number in range(CALLS):
        if number % 2:
            call = ToolCallBlock(id=str(number), name="scratchpad_list", arguments={})
        else:
            arguments = {"name": f"note-{number}.md", "content": "a note"}
            call = ToolCallBlock(id=str(number), name="scratchpad_write", arguments=arguments)
        result = await registry.execute(call, ctx)
        results.append(result.content)

    assert sorted(os.listdir(swapped.elsewhere)) == sorted(ELSEWHERE)
    assert not [r for r in results if "elsewhere-" in r], "a listing showed the other folder"
    assert not [r for r in results if "is full" in r], "the other folder's files were counted"
    # the race was met on both sides: some calls reached the real folder (a note written, or
    # its own note listed), under load sometimes only the listings do
    assert any(r.startswith("wrote ") or "mine.md" in r for r in results)
    assert any("mine.md" in r for r in results)
