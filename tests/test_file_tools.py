"""File tools work inside the workspace and refuse every way out of it."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from clawbot.agents import beneath
from clawbot.agents.workspace import Workspace
from clawbot.errors import WorkspaceError
from clawbot.messages import ToolCallBlock
from clawbot.routing.sessions import Session
from clawbot.security.reach import Reach, Root
from clawbot.settings import Settings
from clawbot.tools import files
from clawbot.tools.files import MAX_READ_CHARS, file_tools
from clawbot.tools.registry import ToolContext, ToolRegistry


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.md").write_text("one\ntwo\n")
    (tmp_path / "outside.txt").write_text("top secret")
    return root


async def run(workspace: Path, name: str, **arguments: object) -> tuple[str, bool]:
    registry = ToolRegistry(file_tools())
    context = ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="main"),
        workspace=workspace,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
    )
    result = await registry.execute(
        ToolCallBlock(id="1", name=name, arguments=dict(arguments)), context
    )
    return result.content, result.is_error


STALL_LIMIT = 10.0
"""Seconds the event loop may go without answering before a test calls it stopped."""


def open_both_ends(fifo: Path) -> int:
    """The read end of ``fifo``, once its write end was opened and closed too: a call blocked
    opening either end wakes. The caller closes it."""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    return reader


@asynccontextmanager
async def loop_watch(fifo: Path) -> AsyncIterator[threading.Event]:
    """An event set if the event loop stopped answering while the block ran.

    A thread asks the loop to run a callback; if that does not happen within STALL_LIMIT,
    it opens both ends of ``fifo``, so a tool stuck opening it returns and the test fails
    instead of hanging.
    """
    loop = asyncio.get_running_loop()
    answered, stalled = threading.Event(), threading.Event()
    held: list[int] = []

    def watch() -> None:
        loop.call_soon_threadsafe(answered.set)
        if not answered.wait(STALL_LIMIT):
            stalled.set()
            held.append(open_both_ends(fifo))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield stalled
    finally:
        await asyncio.to_thread(watcher.join)
        for fd in held:
            os.close(fd)


def io_read_bytes() -> int:
    """Bytes this process has read through system calls so far (Linux's ``rchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd", "~/x"])
async def test_paths_that_leave_the_workspace_are_refused(workspace: Path, path: str) -> None:
    content, is_error = await run(workspace, "file_read", path=path)

    assert is_error
    assert "top secret" not in content
    assert "root:" not in content


async def test_a_symlink_leading_out_of_the_workspace_is_refused(workspace: Path) -> None:
    os.symlink(workspace.parent / "outside.txt", workspace / "link.txt")

    content, is_error = await run(workspace, "file_read", path="link.txt")

    assert is_error
    assert "outside the workspace" in content


async def test_writing_through_a_symlinked_folder_that_leaves_is_refused(workspace: Path) -> None:
    os.symlink(workspace.parent, workspace / "up")

    _, is_error = await run(workspace, "file_write", path="up/evil.txt", content="x")

    assert is_error
    assert not (workspace.parent / "evil.txt").exists()


async def test_a_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    os.symlink(workspace / "notes.md", workspace / "alias.md")

    content, is_error = await run(workspace, "file_read", path="alias.md")

    assert not is_error and content == "one\ntwo\n"


async def test_write_creates_folders_and_read_returns_the_content(workspace: Path) -> None:
    await run(workspace, "file_write", path="a/b/c.txt", content="hello")

    content, is_error = await run(workspace, "file_read", path="a/b/c.txt")

    assert (content, is_error) == ("hello", False)


async def test_edit_replaces_one_unique_occurrence(workspace: Path) -> None:
    _, is_error = await run(workspace, "file_edit", path="notes.md", old_text="two", new_text="2")

    assert not is_error
    assert (workspace / "notes.md").read_text() == "one\n2\n"


async def test_edit_refuses_ambiguous_text(workspace: Path) -> None:
    (workspace / "dup.md").write_text("x x")

    content, is_error = await run(workspace, "file_edit", path="dup.md", old_text="x", new_text="y")

    assert is_error and "occurs 2 times" in content
    assert (workspace / "dup.md").read_text() == "x x"


async def test_list_dir_shows_folders_first_with_a_slash(workspace: Path) -> None:
    (workspace / "sub").mkdir()

    content, _ = await run(workspace, "list_dir")

    assert content.splitlines() == ["sub/", "notes.md"]


@pytest.mark.parametrize(
    "call",
    [
        {"name": "file_read"},
        {"name": "file_write", "content": "x"},
        {"name": "file_edit", "old_text": "a", "new_text": "b"},
    ],
    ids=lambda call: str(call["name"]),
)
async def test_a_named_pipe_is_refused_and_the_event_loop_keeps_running(
    workspace: Path, call: dict[str, str]
) -> None:
    os.mkfifo(workspace / "pipe")
    arguments = {key: value for key, value in call.items() if key != "name"}

    async with loop_watch(workspace / "pipe") as stalled:
        tool = asyncio.create_task(run(workspace, call["name"], path="pipe", **arguments))
        done, _ = await asyncio.wait({tool}, timeout=STALL_LIMIT)
        if not done:  # a worker thread is stuck opening the pipe: free it, then fail
            os.close(open_both_ends(workspace / "pipe"))
            await asyncio.wait_for(tool, STALL_LIMIT)
            pytest.fail(f"the tool waited {STALL_LIMIT:.0f} s for the pipe's other end")
        content, is_error = tool.result()

    assert not stalled.is_set(), "the event loop stopped while the tool ran"
    assert is_error
    assert content.startswith("error: pipe is a named pipe, and file tools only use regular")


@pytest.mark.parametrize(
    "call",
    [
        {"name": "file_read", "path": "notes.md"},
        {"name": "file_write", "path": "notes.md", "content": "changed"},
        {"name": "file_edit", "path": "notes.md", "old_text": "one", "new_text": "1"},
        {"name": "list_dir", "path": "."},
    ],
    ids=lambda call: str(call["name"]),
)
async def test_file_io_runs_off_the_event_loop(
    workspace: Path, call: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool's file system work asks the event loop to run a callback and waits for it:
    in a worker thread the loop runs it at once; on the loop itself it never could."""
    loop = asyncio.get_running_loop()
    stalls: list[str] = []
    open_workspace = files._workspace

    def workspace_once_the_loop_answered(ctx: ToolContext) -> Workspace:
        answered = threading.Event()
        loop.call_soon_threadsafe(answered.set)
        if not answered.wait(STALL_LIMIT):
            stalls.append(call["name"])
        return open_workspace(ctx)

    monkeypatch.setattr(files, "_workspace", workspace_once_the_loop_answered)
    arguments = {key: value for key, value in call.items() if key != "name"}

    content, is_error = await run(workspace, call["name"], **arguments)

    assert stalls == [], "the event loop was blocked while the tool did its I/O"
    assert not is_error, content


@pytest.mark.parametrize(
    "call",
    [
        {"name": "file_read"},
        {"name": "file_write", "content": "changed"},
        {"name": "file_edit", "old_text": "top", "new_text": "changed"},
    ],
    ids=lambda call: str(call["name"]),
)
async def test_a_hard_link_to_a_file_outside_is_refused_and_says_why(
    workspace: Path, call: dict[str, str]
) -> None:
    os.link(workspace.parent / "outside.txt", workspace / "inside.txt")
    arguments = {key: value for key, value in call.items() if key != "name"}

    content, is_error = await run(workspace, call["name"], path="inside.txt", **arguments)

    assert is_error
    assert "inside.txt has 2 hard links, so it may also be a file outside the workspace" in (
        content
    )
    assert "top secret" not in content
    assert (workspace.parent / "outside.txt").read_text() == "top secret"


async def test_reading_a_huge_file_returns_its_start_and_reads_little_more(
    workspace: Path,
) -> None:
    huge = workspace / "huge.log"
    huge.write_text("first line\n")
    os.truncate(huge, 64 * 1024 * 1024)
    before = io_read_bytes()

    content, is_error = await run(workspace, "file_read", path="huge.log")

    assert not is_error
    assert content.startswith("first line\n")
    assert content.endswith(
        f"[truncated: the first {MAX_READ_CHARS:,} characters of a 67,108,864-byte file]"
    )
    assert io_read_bytes() - before < 1024 * 1024


async def test_writing_with_an_empty_path_asks_for_a_file_path(workspace: Path) -> None:
    content, is_error = await run(workspace, "file_write", path="", content="x")

    assert is_error
    assert content == "error: the path is empty — give a file path relative to the workspace"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("a" * 6000, "error: the path aaaa"),
        ("dir/" + "b" * 300, "error: a name in the path dir/bbbb"),
        ("a\0b", "error: the path 'a\\x00b' contains a NUL character"),
        ("notes.md/new.txt", "error: part of notes.md/new.txt is a file where a folder is"),
    ],
    ids=["very long", "long name", "NUL", "file as folder"],
)
async def test_a_bad_path_gets_one_short_sentence_without_the_host_path(
    workspace: Path, path: str, message: str
) -> None:
    content, is_error = await run(workspace, "file_write", path=path, content="x")

    assert is_error
    assert content.startswith(message)
    assert len(content) < 200
    assert str(workspace) not in content
    assert "Errno" not in content


async def test_a_very_long_path_keeps_the_log_lines_short(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    await run(workspace, "file_read", path="a" * 6000)

    assert all(len(record.getMessage()) < 400 for record in caplog.records)


async def test_a_workspace_deleted_while_running_is_reported_without_the_host_path(
    workspace: Path,
) -> None:
    (workspace / "notes.md").unlink()
    workspace.rmdir()

    content, is_error = await run(workspace, "file_read", path="notes.md")

    assert is_error
    assert content.startswith("error: the workspace folder no longer exists")
    assert str(workspace) not in content


def test_a_workspace_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace(tmp_path / "nope")


def test_tool_schema_is_derived_from_the_signature() -> None:
    tools = {t.name: t for t in file_tools()}

    schema = tools["file_edit"].parameters
    assert schema["required"] == ["path", "old_text", "new_text"]
    assert schema["properties"]["path"] == {
        "type": "string",
        "description": "file path relative to the workspace",
    }
    assert "ctx" not in schema["properties"]
    assert tools["list_dir"].parameters["properties"]["path"]["default"] == "."


# the path-escape corpus, for every file tool ------------------------------------------------

EVERY_FILE_TOOL = [
    {"name": "file_read"},
    {"name": "file_write", "content": "changed"},
    {"name": "file_edit", "old_text": "top", "new_text": "changed"},
    {"name": "list_dir"},
]


@pytest.mark.parametrize("call", EVERY_FILE_TOOL, ids=lambda call: str(call["name"]))
@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "sub/../../outside.txt",
        "/etc/passwd",
        "~/outside.txt",
        "file_link.txt",
        "folder_link/file.txt",
        "folder_link",
        "/dev/full",
        "device_link",
        "a\0b",
        "d/" * 3000 + "f",
    ],
    ids=["dotdot", "sub-dotdot", "absolute", "home", "link to a file", "through a link to a "
         "folder", "link to a folder", "device", "link to a device", "NUL", "very long"],
)  # fmt: skip
async def test_every_file_tool_refuses_every_way_out_of_the_workspace(
    workspace: Path, call: dict[str, str], path: str
) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "file.txt").write_text("top secret")
    os.symlink(workspace.parent / "outside.txt", workspace / "file_link.txt")
    os.symlink(outside, workspace / "folder_link")
    os.symlink("/dev/zero", workspace / "device_link")
    arguments = {key: value for key, value in call.items() if key != "name"}

    content, is_error = await run(workspace, call["name"], path=path, **arguments)

    assert is_error
    assert "top secret" not in content
    assert "file.txt" not in content.replace(path, "")  # no listing of the folder outside
    assert (workspace.parent / "outside.txt").read_text() == "top secret"
    assert (outside / "file.txt").read_text() == "top secret"
    assert str(workspace.parent) not in content


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/random", "/dev/urandom"])
async def test_file_read_reads_an_endless_device_up_to_its_cap(
    workspace: Path, device: str
) -> None:
    content, is_error = await run(workspace, "file_read", path=device)

    assert not is_error
    assert content.endswith(
        f"[truncated: the first {MAX_READ_CHARS:,} bytes of a device that never ends]"
    )
    assert len(content) < MAX_READ_CHARS + 100


async def test_file_read_reads_dev_null_as_empty(workspace: Path) -> None:
    assert await run(workspace, "file_read", path="/dev/null") == ("", False)


@pytest.mark.parametrize("call", EVERY_FILE_TOOL[1:], ids=lambda call: str(call["name"]))
@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
async def test_the_readable_devices_are_refused_to_every_other_file_tool(
    workspace: Path, call: dict[str, str], device: str
) -> None:
    arguments = {key: value for key, value in call.items() if key != "name"}

    content, is_error = await run(workspace, call["name"], path=device, **arguments)

    assert is_error and "absolute paths are not allowed" in content


@pytest.mark.parametrize("path", ["/dev//null", "/dev/./zero", "/dev/full", "/proc/self/environ"])
async def test_file_read_reads_only_the_four_devices_spelled_exactly(
    workspace: Path, path: str
) -> None:
    content, is_error = await run(workspace, "file_read", path=path)

    assert is_error and "absolute paths are not allowed" in content


@pytest.mark.parametrize(
    "dots", ["%2e%2e", "．．", "\u2024\u2024", ".\u200b."], ids=["percent", "full-width",
                                                               "one-dot leaders", "zero-width"]
)  # fmt: skip
async def test_look_alike_dots_are_plain_names_inside_the_workspace(
    workspace: Path, dots: str
) -> None:
    read, read_failed = await run(workspace, "file_read", path=f"{dots}/outside.txt")
    _, write_failed = await run(workspace, "file_write", path=f"{dots}/outside.txt", content="x")

    assert read_failed and read.startswith("error: no such file")
    assert not write_failed
    assert (workspace / dots / "outside.txt").read_text() == "x"
    assert (workspace.parent / "outside.txt").read_text() == "top secret"


# links inside the workspace, walked beneath its root ----------------------------------------


@pytest.fixture(params=["kernel", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``kernel``: paths opened with openat2 where this kernel has it; ``walk``: one name at
    a time, as where it has not (and whenever a path holds a link)."""
    if request.param == "walk":
        monkeypatch.setattr(beneath.KERNEL, "usable", False)
    return str(request.param)


async def run_within(
    workspace: Path, reach: Reach, name: str, **arguments: object
) -> tuple[str, bool]:
    async def session_reach() -> Reach:
        return reach

    context = ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="builder"),
        workspace=workspace,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
        reach=session_reach,
    )
    result = await ToolRegistry(file_tools()).execute(
        ToolCallBlock(id="1", name=name, arguments=dict(arguments)), context
    )
    return result.content, result.is_error


async def test_a_relative_link_through_dotdot_inside_the_workspace_is_followed(
    workspace: Path, resolution: str
) -> None:
    (workspace / "sub").mkdir()
    os.symlink("../notes.md", workspace / "sub" / "alias.md")

    assert await run(workspace, "file_read", path="sub/alias.md") == ("one\ntwo\n", False)


async def test_a_relative_link_climbing_above_the_workspace_is_refused(
    workspace: Path, resolution: str
) -> None:
    (workspace / "sub").mkdir()
    os.symlink("../../outside.txt", workspace / "sub" / "up.md")

    content, is_error = await run(workspace, "file_read", path="sub/up.md")

    assert is_error
    assert content.startswith("error: sub/up.md leads outside the workspace (through a link)")


async def test_a_chain_of_links_inside_is_followed_and_a_loop_is_refused(
    workspace: Path, resolution: str
) -> None:
    os.symlink("notes.md", workspace / "one")
    os.symlink("one", workspace / "two")
    os.symlink("loop-b", workspace / "loop-a")
    os.symlink("loop-a", workspace / "loop-b")

    chained = await run(workspace, "file_read", path="two")
    looped, is_error = await run(workspace, "file_read", path="loop-a")

    assert chained == ("one\ntwo\n", False)
    assert is_error
    assert looped.startswith("error: loop-a cannot be followed (its links form a loop)")


async def test_writing_through_a_link_to_a_folder_inside_writes_into_that_folder(
    workspace: Path, resolution: str
) -> None:
    (workspace / "real").mkdir()
    os.symlink("real", workspace / "alias")

    _, is_error = await run(workspace, "file_write", path="alias/new/deep.txt", content="x")

    assert not is_error
    assert (workspace / "real" / "new" / "deep.txt").read_text() == "x"


async def test_list_dir_lists_a_link_by_its_name_without_following_it(
    workspace: Path, resolution: str
) -> None:
    (workspace / "sub").mkdir()
    os.symlink("sub", workspace / "alias")
    os.symlink(workspace.parent, workspace / "up")

    content, _ = await run(workspace, "list_dir")

    assert content.splitlines() == ["sub/", "alias", "notes.md", "up"]


async def test_the_reach_is_checked_where_a_link_in_it_leads(
    workspace: Path, resolution: str
) -> None:
    """A link in an agent's own folder to a file of the workspace outside that folder."""
    (workspace / "agents" / "builder").mkdir(parents=True)
    os.symlink("../../notes.md", workspace / "agents" / "builder" / "notes.md")
    reach = Reach((Root("agents/builder", write=True),), home="agents/builder")

    content, is_error = await run_within(
        workspace, reach, "file_read", path="agents/builder/notes.md"
    )

    assert is_error
    assert content.startswith("error: agents/builder/notes.md is outside this session's reach")


async def test_an_agents_folder_behind_a_link_that_leads_out_is_not_made(
    workspace: Path, resolution: str
) -> None:
    os.symlink(workspace.parent, workspace / "agents")
    reach = Reach((Root("agents/builder", write=True),), home="agents/builder")

    content, is_error = await run_within(
        workspace, reach, "file_write", path="agents/builder/a.md", content="x"
    )

    assert is_error
    assert content.startswith(
        "error: the folder agents/builder leads outside the workspace (through a link)"
    )
    assert not (workspace.parent / "builder").exists()


async def test_without_openat2_the_walk_one_name_at_a_time_stands_in(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel without the call (here: a number no kernel has, so ENOSYS, as on Linux before
    5.6 or behind a seccomp filter)."""
    kernel = beneath.KERNEL.__class__(number=999_999)
    monkeypatch.setattr(beneath, "KERNEL", kernel)
    os.symlink(workspace.parent, workspace / "up")

    read = await run(workspace, "file_read", path="notes.md")
    refused, is_error = await run(workspace, "file_read", path="up/outside.txt")

    assert read == ("one\ntwo\n", False)
    assert is_error and "leads outside the workspace" in refused
    assert kernel.usable is False
