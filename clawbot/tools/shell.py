"""The ``shell_exec`` tool: a command run by bash in the session's workspace.

The command gets a clean environment (``PATH``, ``HOME``, ``LANG``: never a provider key or
a bot token), no standard input, a working folder confined like the file tools' paths, and a
time limit after which its whole process group is killed. Its output is read as it comes
(the event loop never waits on it) and capped: the start and the end are kept.

Where bubblewrap works (``clawbot.tools.sandbox``) the command runs inside it with only the
session's reach of the workspace mounted, and no network unless ``CLAWBOT_SHELL_NETWORK``
grants it: the tool's risk is then ``guarded``. Without it nothing but the checks of
``clawbot.tools.shell_paths`` stands between the command and the host, so the risk is
``unsafe``: every call needs a person's confirmation.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from clawbot.errors import ClawbotError, ToolError
from clawbot.reach import WHOLE, Reach
from clawbot.tools.registry import Tool, ToolContext, make_tool
from clawbot.tools.sandbox import INSIDE_WORKSPACE, Bubblewrap, Mount
from clawbot.tools.shell_paths import Place, check_command, working_folder
from clawbot.workspace import Workspace

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
READ_CHUNK = 64 * 1024
DRAIN_SECONDS = 2.0
GONE_CHECKS, GONE_CHECK_SECONDS = 100, 0.01
"""How long the output of a finished command is still read (a pipe a stray process holds)."""
SANDBOXED_NOTE = (
    " It runs in a sandbox: the workspace is /workspace, /tmp is empty and private, the"
    " system's programs are read-only, and nothing else of the host is there."
)


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
    argv: list[str], *, cwd: Path | None, env: dict[str, str], timeout: float, limit: int
) -> Outcome:
    """Run ``argv`` in a new session (its own process group), killing the whole group when
    it ends, when its time is up, or when the turn is stopped.

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
        )
    )
    try:
        process = await asyncio.shield(starting)
    except asyncio.CancelledError:
        os.close(read_fd)
        # Stopped while asyncio still set the process up: it may run already (and have
        # started others), and asyncio would kill only it, so its whole group ends first.
        with contextlib.suppress(Exception):
            await _end_group((await starting).pid)
        raise
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
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
            await _end_group(process.pid)  # what it left running in the background goes too
        await process.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
    finally:
        reader.cancel()
        transport.close()
    return Outcome(None if timed_out else process.returncode, output.text())


async def _drain(stream: asyncio.StreamReader, output: CappedOutput) -> None:
    while chunk := await stream.read(READ_CHUNK):
        output.add(chunk)


async def _end_group(pgid: int) -> None:
    """Kill the process group and wait, briefly, until it is gone: a killed process is not
    gone at once, and nothing the command started should run on after the call returns
    (a member that stays, such as a zombie nobody reaps, is given up on)."""
    for _ in range(GONE_CHECKS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        await asyncio.sleep(GONE_CHECK_SECONDS)


def _mounts(workspace: Workspace, reach: Reach) -> list[Mount]:
    """The reach's folders as sandbox mounts; a folder missing or leading out is left out,
    and so is one that is a link to a folder the reach does not hold so (an agent's folder
    replaced by a link to the workspace's root must not bring the root in)."""
    mounts = []
    for root in reach.roots:
        try:
            source = workspace.resolve(root.path)
        except ClawbotError:  # a root that leads out of the workspace
            continue
        if not reach.allows(workspace.relative(source), write=root.write):
            continue
        if source.is_dir():
            target = INSIDE_WORKSPACE if root.path == WHOLE else f"{INSIDE_WORKSPACE}/{root.path}"
            mounts.append(Mount(source, target, root.write))
    return mounts


def _working_folder(workspace: Workspace, cwd: str | None, reach: Reach) -> str:
    """The command's folder: ``cwd``, else the session's own folder (created when missing:
    an agent's folder need not exist before its first command)."""
    if reach.folder_to_make is not None:
        workspace.ensure_folder(reach.folder_to_make)
    if cwd is None:
        cwd = reach.home or WHOLE
    return working_folder(workspace, cwd, reach)


def _report(outcome: Outcome, timeout: float) -> str:
    if outcome.exit_code is None:
        status = (
            f"stopped: it ran past its {timeout:g} s timeout, so it and everything it started "
            "were killed"
        )
    elif outcome.exit_code < 0:
        status = f"killed by signal {-outcome.exit_code}"
    else:
        status = f"exit code {outcome.exit_code}"
    return f"{status}\n{outcome.output or '(no output)'}"


def shell_tool(sandbox: Bubblewrap | None) -> Tool:
    """``shell_exec``, sandboxed by ``sandbox`` when there is one (risk ``guarded``), else
    run on the host (risk ``unsafe``)."""

    async def shell_exec(
        command: Annotated[str, Field(min_length=1, description="the command line, run by bash")],
        ctx: ToolContext,
        cwd: Annotated[
            str | None,
            Field(description="working folder relative to the workspace (default: your own)"),
        ] = None,
        timeout: Annotated[
            float | None, Field(gt=0, description="seconds it may run (at most the setting)")
        ] = None,
    ) -> str:
        """Run a shell command in the workspace; returns its exit code and output."""
        settings = ctx.settings
        limit = min(timeout or settings.shell_timeout, settings.shell_timeout)
        place = await checked_place(ctx, command, cwd)
        workspace, reach, relative = place.workspace, place.reach, place.cwd
        if sandbox is not None:
            inside = INSIDE_WORKSPACE if relative == WHOLE else f"{INSIDE_WORKSPACE}/{relative}"
            argv = sandbox.wrap(
                [SHELL, "-c", command],
                mounts=await asyncio.to_thread(_mounts, workspace, reach),
                cwd=inside,
                network=settings.shell_network,
            )
            outcome = await run_command(
                argv,
                cwd=None,
                env=clean_environment("/tmp"),
                timeout=limit,
                limit=settings.shell_max_output,
            )
        else:
            home = await asyncio.to_thread(tempfile.mkdtemp, prefix="clawbot-shell-")
            try:
                outcome = await run_command(
                    [SHELL, "-c", command],
                    cwd=workspace.root / relative,
                    env=clean_environment(home),
                    timeout=limit,
                    limit=settings.shell_max_output,
                )
            finally:  # whatever the command left in its home (off the loop: it may be big)
                await asyncio.to_thread(shutil.rmtree, home, True)
        return _report(outcome, limit)

    async def checked_place(ctx: ToolContext, command: str, cwd: str | None) -> Place:
        """Where the command would run, once its folder and the paths it names pass the
        session's reach (see ``shell_paths``); a ToolError otherwise."""
        if not ctx.workspace.is_dir():
            raise ToolError("the workspace folder no longer exists", hint="tell the user")
        workspace = Workspace(ctx.workspace)
        reach = await ctx.reach()
        relative = await asyncio.to_thread(_working_folder, workspace, cwd, reach)
        if sandbox is None and not reach.allows(WHOLE, write=True):
            raise ToolError(
                "this session may not change the whole workspace (its reach: "
                f"{reach.describe()}), and without the sandbox a command cannot be held "
                "to that",
                hint="install bubblewrap so commands run sandboxed, or use the file tools",
            )
        root = INSIDE_WORKSPACE if sandbox is not None else str(workspace.root)
        place = Place(workspace=workspace, cwd=relative, reach=reach, root=root)
        await asyncio.to_thread(check_command, command, place)
        return place

    async def precheck(arguments: Any, ctx: ToolContext) -> None:
        """Nobody is asked to approve a command its folder or paths would refuse."""
        await checked_place(ctx, arguments.command, arguments.cwd)

    description = (
        "Run a shell command (bash) in the workspace and return its exit code and output "
        "(start and end of long output). No standard input; killed at its timeout."
    )
    return make_tool(
        shell_exec,
        description=description + (SANDBOXED_NOTE if sandbox is not None else ""),
        risk="guarded" if sandbox is not None else "unsafe",
        groups=("group:shell",),
        precheck=precheck,
    )
