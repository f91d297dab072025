"""shell_exec runs in the workspace with a clean environment, within its time and output
limits, and — sandboxed by bubblewrap where it works — reaches nothing outside its roots."""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

import pytest

from clawbot.agents.profiles import AgentSpec, SubagentPolicy
from clawbot.app import Clawbot
from clawbot.messages import ToolCallBlock
from clawbot.policies import ToolPolicy
from clawbot.routing.sessions import Session
from clawbot.security.reach import Reach, Root
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel, call
from clawbot.tools.files import file_tools
from clawbot.tools.registry import ToolContext, ToolRegistry
from clawbot.tools.sandbox import Bubblewrap, find_bubblewrap
from clawbot.tools.shell import shell_tool

from .conftest import Chat, add_agent
from .shell_calls import (
    BOT_TOKEN,
    PROVIDER_KEY,
    SECRET,
    hidden,
    make_workspace,
    on_host,
    run,
    running,
)

SANDBOX = find_bubblewrap()
needs_bwrap = pytest.mark.skipif(SANDBOX is None, reason="bubblewrap cannot run here")
BOTH = pytest.mark.parametrize(
    "sandbox", [None, pytest.param(SANDBOX, marks=needs_bwrap)], ids=["host", "sandboxed"]
)
"""On the host (allowed by the operator: ``on_host()``) and in bubblewrap."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


# running --------------------------------------------------------------------------------


@BOTH
async def test_a_command_runs_in_the_workspace_and_returns_its_exit_code_and_output(
    workspace: Path, sandbox: Bubblewrap | None
) -> None:
    content, is_error = await run(
        workspace, "echo made > made.txt; cat notes.md; exit 3", sandbox=sandbox
    )

    assert not is_error
    assert content == "exit code 3\none\ntwo\n"
    assert (workspace / "made.txt").read_text() == "made\n"


@BOTH
async def test_cwd_runs_the_command_in_that_folder_of_the_workspace(
    workspace: Path, sandbox: Bubblewrap | None
) -> None:
    content, _ = await run(workspace, "echo here > here.txt", sandbox=sandbox, cwd="sub")

    assert content.startswith("exit code 0")
    assert (workspace / "sub" / "here.txt").read_text() == "here\n"


@BOTH
async def test_the_environment_holds_no_key_or_token(
    workspace: Path, sandbox: Bubblewrap | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("CLAWBOT_TELEGRAM_TOKEN", BOT_TOKEN)

    content, _ = await run(workspace, "env", sandbox=sandbox)

    names = {line.split("=", 1)[0] for line in content.splitlines()[1:] if "=" in line}
    assert names <= {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "OLDPWD"}
    assert PROVIDER_KEY not in content
    assert "ABCdefGHI" not in content


async def test_home_is_a_fresh_folder_removed_after_the_call(workspace: Path) -> None:
    content, _ = await run(workspace, 'ls -A "$HOME"; touch "$HOME/.left"; echo "$HOME"')

    home = content.splitlines()[-1]
    assert content == f"exit code 0\n{home}\n"  # it was empty
    assert not Path(home).exists()


@BOTH
async def test_a_command_past_its_timeout_is_killed_with_everything_it_started(
    workspace: Path, sandbox: Bubblewrap | None
) -> None:
    content, is_error = await run(
        workspace, "sleep 1000.51 & sleep 1000.52", sandbox=sandbox, timeout=0.5
    )

    assert not is_error
    assert content.startswith("stopped: it ran past its 0.5 s timeout")
    assert running("1000.51") == [] and running("1000.52") == []


@BOTH
async def test_what_a_finished_command_left_running_is_killed_at_once(
    workspace: Path, sandbox: Bubblewrap | None
) -> None:
    content, _ = await run(workspace, "sleep 1000.61 & echo started", sandbox=sandbox, timeout=60)

    assert content == "exit code 0\nstarted\n"
    assert running("1000.61") == []


async def test_a_stopped_turn_kills_the_running_command(workspace: Path) -> None:
    # A duration of its own, so a command some other run left behind is not counted.
    marker = f"1000.{random.randrange(10**6, 10**7)}"
    task = asyncio.create_task(run(workspace, f"touch begun; sleep {marker}", timeout=60))
    async with asyncio.timeout(10):
        while not (workspace / "begun").exists():
            await asyncio.sleep(0.01)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert running(marker) == []


async def test_a_running_command_leaves_the_event_loop_free(workspace: Path) -> None:
    task = asyncio.create_task(
        run(workspace, "while [ ! -e go ]; do sleep 0.01; done; echo went", timeout=20)
    )
    with pytest.raises(TimeoutError):  # the loop ran this timer while the command waited
        await asyncio.wait_for(asyncio.shield(task), 0.3)

    (workspace / "go").touch()

    assert await task == ("exit code 0\nwent\n", False)


async def test_long_output_keeps_its_start_and_its_end(workspace: Path) -> None:
    settings = on_host(shell_max_output=1000)

    content, _ = await run(workspace, "seq 1 100000", settings=settings)

    assert content.startswith("exit code 0\n1\n2\n3\n")
    assert content.endswith("99999\n100000\n")
    assert "bytes left out of 588,895" in content
    assert len(content) < 1200


# the path checks ----------------------------------------------------------------------------


def make_links(workspace: Path) -> None:
    os.symlink(workspace.parent / "outside.txt", workspace / "link.txt")
    os.symlink(workspace.parent / "outside", workspace / "link_dir")


@pytest.mark.parametrize(
    "cwd",
    ["..", "sub/../..", "/etc", "~", "a\0b", "x" * 6000, "link_dir", "notes.md", "%2e%2e", "．．"],
    ids=["dotdot", "sub-dotdot", "absolute", "home", "NUL", "very long", "link to a folder",
         "a file", "percent-encoded", "full-width dots"],
)  # fmt: skip
async def test_a_working_folder_outside_the_workspace_or_not_a_folder_is_refused(
    workspace: Path, cwd: str
) -> None:
    make_links(workspace)

    content, is_error = await run(workspace, "cat file.txt; pwd", cwd=cwd)

    assert is_error
    assert SECRET not in content
    assert str(workspace.parent) not in content


@pytest.mark.parametrize(
    "command",
    [
        "cat ../outside.txt",
        "cat sub/../../outside.txt",
        "cat ../*",
        "cat /etc/passwd",
        "cat /usr/../etc/passwd",
        "cat ~/.bashrc",
        "cat link.txt",
        "ls link_dir/",
        "cat --file=../outside.txt",
        "cat < ../outside.txt",
        "cat /dev/sda",
        "cat /proc/1/environ",
        "ls /",
        "cat a\0b",
        "cat " + "d/" * 3000 + "f",
    ],
    ids=["dotdot", "sub-dotdot", "glob", "absolute", "absolute-dotdot", "home", "link to a file",
         "link to a folder", "option value", "redirect", "block device", "proc", "root", "NUL",
         "very long"],
)  # fmt: skip
async def test_a_command_naming_a_path_outside_its_roots_is_refused_before_it_runs(
    workspace: Path, command: str
) -> None:
    make_links(workspace)

    content, is_error = await run(workspace, f"touch ran; {command}")

    assert is_error
    assert SECRET not in content and "root:" not in content
    assert not (workspace / "ran").exists()


@pytest.mark.parametrize(
    "command", ["cat %2e%2e/outside.txt", "cat ．．/outside.txt", "cat \u2024\u2024/outside.txt"]
)
async def test_look_alike_dots_are_plain_names_inside_the_workspace(
    workspace: Path, command: str
) -> None:
    content, is_error = await run(workspace, command)

    assert not is_error
    assert content.startswith("exit code 1")
    assert "No such file" in content and SECRET not in content


async def test_the_always_readable_devices_may_be_used(workspace: Path) -> None:
    content, _ = await run(workspace, "head -c 5 /dev/zero | wc -c; cat /dev/null >/dev/null")

    assert content == "exit code 0\n5\n"


async def test_paths_inside_the_workspace_and_system_programs_are_allowed(
    workspace: Path,
) -> None:
    content, is_error = await run(workspace, "/usr/bin/cat ../notes.md", cwd="sub")

    assert (content, is_error) == ("exit code 0\none\ntwo\n", False)


# the sandbox --------------------------------------------------------------------------------


@needs_bwrap
async def test_a_sandboxed_command_cannot_read_a_file_outside_its_roots(workspace: Path) -> None:
    outside = str(workspace.parent / "outside.txt")

    content, _ = await run(workspace, f"cat {hidden(outside)}", sandbox=SANDBOX)

    assert content.startswith("exit code 1")
    assert "No such file" in content and SECRET not in content


@needs_bwrap
async def test_a_sandboxed_command_cannot_follow_a_link_out_of_the_workspace(
    workspace: Path,
) -> None:
    make_links(workspace)

    content, _ = await run(
        workspace, f"cat {hidden('link.txt')}; ls {hidden('link_dir')}", sandbox=SANDBOX
    )

    assert SECRET not in content and "file.txt" not in content


@needs_bwrap
async def test_a_hard_link_to_an_outside_file_is_read_in_the_sandbox_though_file_read_refuses_it(
    workspace: Path,
) -> None:
    """The gap docs/tools.md names: a hard link is the outside file itself, so mounting
    the workspace mounts it too; the file tools refuse a file with more than one link."""
    os.link(workspace.parent / "outside.txt", workspace / "linked.txt")
    read = ToolCallBlock(id="2", name="file_read", arguments={"path": "linked.txt"})
    context = ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="main"),
        workspace=workspace,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
    )

    content, _ = await run(workspace, "cat linked.txt", sandbox=SANDBOX)
    refused = await ToolRegistry(file_tools()).execute(read, context)

    assert content == f"exit code 0\n{SECRET}"
    assert refused.is_error and SECRET not in refused.content


@needs_bwrap
async def test_a_sandboxed_command_cannot_write_outside_the_workspace(workspace: Path) -> None:
    target = workspace.parent / "written.txt"

    content, _ = await run(workspace, f"echo x > {hidden(str(target))}", sandbox=SANDBOX)

    assert not content.startswith("exit code 0")
    assert not target.exists()


@needs_bwrap
async def test_a_sandboxed_command_holds_no_capability(workspace: Path) -> None:
    content, _ = await run(workspace, f"grep CapEff {hidden('/proc/self/status')}", sandbox=SANDBOX)

    assert content == "exit code 0\nCapEff:\t0000000000000000\n"


@needs_bwrap
async def test_a_read_only_reach_mounts_the_workspace_read_only(workspace: Path) -> None:
    content, _ = await run(
        workspace, "cat notes.md; echo x > new.txt", sandbox=SANDBOX, reach=Reach.whole(write=False)
    )

    assert "one\ntwo" in content and "Read-only file system" in content
    assert not (workspace / "new.txt").exists()


@needs_bwrap
async def test_a_writable_folder_inside_a_read_only_workspace_may_be_written(
    workspace: Path,
) -> None:
    reach = Reach((Root(".", write=False), Root("sub", write=True)))

    content, _ = await run(
        workspace, "echo a > sub/ok.txt; echo b > no.txt", sandbox=SANDBOX, reach=reach
    )

    assert "no.txt: Read-only file system" in content
    assert (workspace / "sub" / "ok.txt").read_text() == "a\n"
    assert not (workspace / "no.txt").exists()


@needs_bwrap
async def test_a_read_only_folder_inside_a_writable_workspace_is_written_as_file_write_may(
    workspace: Path,
) -> None:
    """The reach writes wherever a writable folder holds the path: the sandbox mounts the
    folder once, with the workspace, not again read-only over it."""
    reach = Reach((Root(".", write=True), Root("sub", write=False)))

    content, _ = await run(workspace, "echo a > sub/ok.txt", sandbox=SANDBOX, reach=reach)

    assert content == "exit code 0\n(no output)"
    assert (workspace / "sub" / "ok.txt").read_text() == "a\n"


def test_a_bwrap_that_cannot_mount_a_folder_by_its_descriptor_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folders are mounted by descriptor (``--ro-bind-fd``, bubblewrap 0.10 and later): a
    bwrap without it fails the check at start, rather than every command."""
    old = tmp_path / "bin" / "bwrap"
    old.parent.mkdir()
    old.write_text('#!/bin/sh\ncase " $* " in *" --ro-bind-fd "*) exit 1;; esac\nexit 0\n')
    old.chmod(0o755)
    monkeypatch.setenv("PATH", str(old.parent))

    assert find_bubblewrap.__wrapped__() is None
    old.write_text("#!/bin/sh\nexit 0\n")  # one that knows every option
    assert find_bubblewrap.__wrapped__() == Bubblewrap(str(old))


@needs_bwrap
async def test_a_folder_outside_the_reach_is_not_in_the_sandbox(workspace: Path) -> None:
    reach = Reach((Root("sub", write=True),))

    content, _ = await run(
        workspace, f"ls; cat {hidden('../notes.md')}", sandbox=SANDBOX, reach=reach, cwd="sub"
    )

    assert "one\ntwo" not in content and "No such file" in content


async def test_outside_the_reach_the_working_folder_is_refused(workspace: Path) -> None:
    content, is_error = await run(workspace, "ls", reach=Reach((Root("sub", write=True),)))

    assert is_error and "outside this session's reach" in content


@needs_bwrap
async def test_a_sandboxed_command_cannot_reach_the_network(workspace: Path) -> None:
    connected, port = await tcp_listener()

    content, _ = await run(workspace, connect_to(port), sandbox=SANDBOX)

    assert not content.startswith("exit code 0")
    assert not connected


@needs_bwrap
async def test_with_the_network_granted_a_sandboxed_command_reaches_it(workspace: Path) -> None:
    connected, port = await tcp_listener()
    settings = Settings(_env_file=None, shell_network=True)  # type: ignore[call-arg]

    content, _ = await run(workspace, connect_to(port), sandbox=SANDBOX, settings=settings)

    assert content.startswith("exit code 0")
    assert connected


async def tcp_listener() -> tuple[list[bool], int]:
    """A server on 127.0.0.1 noting each connection; closed with the test's event loop."""
    connected: list[bool] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.append(True)
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    return connected, server.sockets[0].getsockname()[1]


def connect_to(port: int) -> str:
    return (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5).recv(1)\""
    )


async def test_without_the_sandbox_a_session_that_may_only_read_is_refused(
    workspace: Path,
) -> None:
    content, is_error = await run(workspace, "echo x > new.txt", reach=Reach.whole(write=False))

    assert is_error and "without the sandbox" in content
    assert not (workspace / "new.txt").exists()


# risk, policy, doctor ----------------------------------------------------------------------


@needs_bwrap
def test_the_shell_is_guarded_when_sandboxed_and_unsafe_without() -> None:
    assert shell_tool(SANDBOX).risk == "guarded"
    assert shell_tool(None).risk == "unsafe"


def test_only_main_or_an_agent_naming_shell_exec_gets_it() -> None:
    shell = shell_tool(SANDBOX)
    everything = ToolPolicy(allow=("*",))
    named = ToolPolicy(allow=("*", "shell_exec"))

    assert AgentSpec(agent_id="main", name="main").allows_tool(shell.name, shell.groups)
    assert not AgentSpec(agent_id="coder", name="c", tools=everything).allows_tool(
        shell.name, shell.groups
    )
    assert AgentSpec(agent_id="coder", name="c", tools=named).allows_tool(shell.name, shell.groups)


# in a conversation ---------------------------------------------------------------------------


async def test_main_runs_a_command_in_a_conversation(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("shell_exec", command="echo hi > hi.txt; cat hi.txt"), "Done.")

    await chat.say("make hi.txt")

    assert scripted.requests[1].tool_results == ["exit code 0\nhi\n"]
    assert (bot.workspace.root / "hi.txt").read_text() == "hi\n"


async def test_a_read_only_agent_gains_no_write_through_a_child_with_the_shell(
    workers: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    worker: ScriptedModel,
) -> None:
    reader = ToolPolicy(allow=("sessions_spawn", "file_read", "list_dir"))
    await add_agent(
        workers,
        "lead",
        model=scripted.model_string,
        tools=reader,
        subagents=SubagentPolicy(allow=("worker",)),
    )
    await workers.router.update_session(
        await workers.router.session_for(channel.message("x")), agent_id="lead"
    )
    shell = ToolPolicy(allow=("*", "shell_exec"))
    await workers.agents.update(workers.agents.get("worker").model_copy(update={"tools": shell}))
    scripted.add(call("sessions_spawn", task="write it", agent="worker"), "Started.", "Ok.")
    worker.add(call("shell_exec", command="echo x > new.txt"), "Done.")

    await chat.say("go")
    await workers.scheduler.wait_idle()

    result = worker.requests[1].tool_results[0]
    assert result.startswith("error: tool 'shell_exec' is not available to this agent")
    assert not (workers.workspace.root / "new.txt").exists()
