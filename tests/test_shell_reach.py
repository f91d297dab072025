"""What a shell command reaches and what outlives it: where bubblewrap cannot run, the shell
is refused unless the operator allows commands on the host, which the doctor, the approval
request and the docs then say reach every file of the bot's user; clawbot's own environment
stays closed to such a command, and nothing a command starts, sandboxed or not, outlives
its call or clawbot."""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import random
import sys
from pathlib import Path

import pytest

import clawbot.app
from clawbot.app import Clawbot
from clawbot.cli.checks import shell_check
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel, call
from clawbot.tools.sandbox import Bubblewrap
from clawbot.tools.shell import shell_tools

from .conftest import Chat
from .shell_calls import BOT_TOKEN, PROVIDER_KEY, SECRET, hidden, make_workspace, on_host, run
from .shell_calls import running as running_sleeps
from .spawned import spawn
from .test_approvals import is_request
from .test_shell_tool import BOTH, SANDBOX, needs_bwrap

ROOT = Path(__file__).resolve().parent.parent
GONE_WITHIN = 10.0
"""Seconds the processes of a killed clawbot may take to be ended (polled, not slept)."""
PROC = hidden("/proc")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path)


def marker() -> str:
    """A ``sleep`` duration of this test's own, so what another run left is not counted."""
    return f"777.{random.randrange(10**6, 10**7)}"


# refused unless allowed -------------------------------------------------------------------


def test_without_bubblewrap_the_shell_is_offered_only_when_host_access_is_allowed() -> None:
    bwrap = Bubblewrap("/usr/bin/bwrap")

    assert shell_tools(None, Settings(_env_file=None)) == ()  # type: ignore[call-arg]
    assert shell_tools(None, None) == ()
    assert [t.risk for t in shell_tools(None, on_host())] == ["unsafe"]
    assert [t.risk for t in shell_tools(bwrap, Settings(_env_file=None))] == ["guarded"]  # type: ignore[call-arg]


async def test_where_bubblewrap_cannot_run_the_model_is_not_offered_the_shell(
    settings: Settings, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clawbot.app, "find_bubblewrap", lambda: None)
    scripted.add("Hello.")
    refusing = settings.model_copy(update={"shell_unsandboxed": "refuse"})

    async with await Clawbot.open(refusing) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await Chat(bot, channel).say("hi")

    assert "shell_exec" not in scripted.requests[0].tool_names
    assert "file_read" in scripted.requests[0].tool_names


async def test_a_host_command_is_refused_when_the_settings_do_not_allow_it(
    workspace: Path,
) -> None:
    content, is_error = await run(workspace, "touch ran", settings=Settings(_env_file=None))  # type: ignore[call-arg]

    assert is_error
    assert "CLAWBOT_SHELL_UNSANDBOXED=allow-host-access" in content
    assert not (workspace / "ran").exists()


def test_doctor_says_the_shell_is_not_offered_and_how_to_enable_it() -> None:
    line = shell_check(None, Settings(_env_file=None)).line  # type: ignore[call-arg]

    assert line.startswith(
        "off      shell sandbox: bubblewrap (bwrap) is missing or cannot run here, so "
        "shell_exec is not offered — install bubblewrap (Debian, Ubuntu: apt-get install "
        "bubblewrap"
    )
    assert "set CLAWBOT_SHELL_UNSANDBOXED=allow-host-access to run commands on the host" in line
    assert "the database with every transcript" in line


def test_doctor_says_what_an_allowed_host_command_reaches() -> None:
    line = shell_check(None, on_host()).line

    assert line.startswith("ok       shell sandbox: bubblewrap (bwrap) is missing")
    assert "CLAWBOT_SHELL_UNSANDBOXED=allow-host-access: shell_exec is unsafe" in line
    assert (
        "it runs on the host, unsandboxed, as the bot's user: it can read and change every "
        "file that user can — the .env with the API keys and tokens, the database with every "
        "transcript, ~/.ssh — and use the network"
    ) in line
    assert shell_check(Bubblewrap("/usr/bin/bwrap"), on_host()).line == (
        "ok       shell sandbox: bubblewrap works: shell_exec runs sandboxed (guarded)"
    )


async def test_the_approval_request_for_a_host_command_says_what_it_reaches(
    settings: Settings, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clawbot.app, "find_bubblewrap", lambda: None)
    scripted.add(call("shell_exec", command="echo hi"), "Done.")
    asking = settings.model_copy(update={"autonomy": "supervised"})

    async with await Clawbot.open(asking) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.receive(channel.message("say hi"))
        request = await channel.sent_when(is_request)

    assert "shell_exec — unsafe" in request.text
    assert (
        "Unsandboxed: it runs on the host, unsandboxed, as the bot's user: it can read and "
        "change every file that user can — the .env with the API keys and tokens, the "
        "database with every transcript, ~/.ssh — and use the network"
    ) in request.text


async def test_an_allowed_host_command_reads_what_the_bots_user_can(workspace: Path) -> None:
    content, _ = await run(workspace, f"cat {hidden(str(workspace.parent / 'outside.txt'))}")

    assert content == f"exit code 0\n{SECRET}"  # what the doctor and the approval say


# nothing outlives the call ----------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    "command",
    [
        "setsid {up} &",
        "({up} &)",
        "(setsid bash -c '{up} & sleep {m}' &)",
        "nohup {up} >/dev/null 2>&1 & disown",
    ],
    ids=["setsid", "double fork", "setsid double fork", "nohup disown"],
)
async def test_a_process_the_command_detached_does_not_outlive_the_call(
    workspace: Path, sandbox: Bubblewrap | None, command: str
) -> None:
    m = marker()
    up = f'sh -c "touch up; exec sleep {m}"'  # the command waits until it is up, detached
    command = command.format(up=up, m=m) + "\nuntil [ -e up ]; do sleep 0.01; done; echo started"

    content, _ = await run(workspace, command, sandbox=sandbox, timeout=60)

    assert content == "exit code 0\nstarted\n"
    assert running_sleeps(m) == []


@needs_bwrap
async def test_a_sandboxed_call_returns_only_once_what_it_started_is_gone(
    workspace: Path,
) -> None:
    """bwrap may exit before the kernel has ended the rest of its PID namespace (seen for
    most calls like these), so the call waits for the sandbox's init."""
    for _ in range(5):
        m = marker()
        command = f"for i in 1 2 3 4 5 6 7 8 9 10; do nohup sleep {m} >/dev/null 2>&1 & done"

        content, _ = await run(workspace, f"{command}; echo started", sandbox=SANDBOX)

        assert content == "exit code 0\nstarted\n"
        assert running_sleeps(m) == []


@BOTH
async def test_a_detached_process_is_ended_at_the_timeout(
    workspace: Path, sandbox: Bubblewrap | None
) -> None:
    m = marker()

    content, _ = await run(
        workspace, f"(setsid sleep {m} &); sleep {m}", sandbox=sandbox, timeout=0.5
    )

    assert content.startswith("stopped: it ran past its 0.5 s timeout")
    assert running_sleeps(m) == []


async def test_a_command_that_kills_its_keeper_still_leaves_nothing_running(
    workspace: Path,
) -> None:
    m = marker()

    content, _ = await run(workspace, f"setsid sleep {m} & kill -9 $PPID; sleep {m}", timeout=60)

    assert content.startswith("killed by signal 9")
    assert running_sleeps(m) == []


async def test_a_host_command_killed_by_a_signal_is_reported_so(workspace: Path) -> None:
    content, _ = await run(workspace, "echo going; kill -TERM $$")

    assert content == "killed by signal 15\ngoing\n"


@pytest.mark.parametrize(
    "mode", ["host", pytest.param("sandboxed", marks=needs_bwrap)], ids=["host", "sandboxed"]
)
async def test_nothing_a_command_started_outlives_clawbot_killed_during_the_call(
    workspace: Path, mode: str
) -> None:
    m = marker()
    command = f"setsid sleep {m} & (sleep {m} &); sleep {m}"
    probe = await spawn(
        sys.executable, "-m", "tests.shell_probe", str(workspace), mode, command, cwd=ROOT
    )
    async with asyncio.timeout(30):
        while len(running_sleeps(m)) < 3:  # all three are up
            await asyncio.sleep(0.01)

    probe.kill()
    await probe.wait()

    async with asyncio.timeout(GONE_WITHIN):
        while running_sleeps(m):
            await asyncio.sleep(0.01)


# clawbot's secrets -----------------------------------------------------------------------


def decoded(text: str) -> str:
    """Every line of ``text`` that is base64, decoded (a command's way past text checks)."""
    found = []
    for line in text.splitlines():
        try:
            found.append(base64.b64decode(line, validate=True).decode(errors="replace"))
        except (binascii.Error, ValueError):
            continue
    return "\n".join(found)


@pytest.mark.parametrize("mode", ["host", "host-unprivileged"])
async def test_a_host_command_cannot_read_clawbots_environment_or_memory(
    workspace: Path, mode: str
) -> None:
    """clawbot (here the probe, started with a provider key and a bot token in its
    environment) is the parent of the command's keeper ($PPID)."""
    command = (
        f"bot=$(cut -d' ' -f4 {PROC}/$PPID/stat); echo clawbot=$bot; "
        f"cat {PROC}/$PPID/environ {PROC}/$bot/environ; echo; "
        f"base64 -w0 {PROC}/$PPID/environ; echo; base64 -w0 {PROC}/$bot/environ; echo; "
        f"tr '\\0' '\\n' < {PROC}/$bot/environ | base64 -w0; echo; "
        f"head -c 64 {PROC}/$bot/mem"
    )
    environment = {
        **os.environ,
        "OPENAI_API_KEY": PROVIDER_KEY,
        "CLAWBOT_TELEGRAM_TOKEN": BOT_TOKEN,
    }
    probe = await spawn(
        sys.executable,
        "-m",
        "tests.shell_probe",
        str(workspace),
        mode,
        command,
        cwd=ROOT,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
    )
    output, _ = await probe.communicate()
    content = output.decode()

    assert f"clawbot={probe.pid}\n" in content  # it found clawbot's process
    assert f"/proc/{probe.pid}/mem' for reading: Permission denied" in content
    for text in (content, decoded(content)):
        assert PROVIDER_KEY not in text and "shellmustnotseethis" not in text
        assert BOT_TOKEN not in text and "ABCdefGHI" not in text


async def test_a_host_command_holds_no_privilege(workspace: Path) -> None:
    status = hidden("/proc/self/status")

    content, _ = await run(workspace, f"grep -E '^(CapEff|CapBnd|NoNewPrivs)' {status}")

    assert content == (
        "exit code 0\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"
    )
