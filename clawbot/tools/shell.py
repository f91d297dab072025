"""The ``shell_exec`` tool: a command run by bash in the session's workspace.

The command gets a clean environment (``PATH``, ``HOME``, ``LANG``: never a provider key or
a bot token), no standard input, a working folder confined like the file tools' paths, and a
time limit; everything it started is ended with it (``clawbot.tools.processes``). Its output
is read as it comes (the event loop never waits on it) and capped: the start and the end
are kept.

Where bubblewrap works (``clawbot.tools.sandbox``) the command runs inside it with only the
session's reach of the workspace mounted (each folder opened beneath the workspace's root and
checked, then mounted by that descriptor), and no network unless ``CLAWBOT_SHELL_NETWORK``
grants it: the tool's risk is then ``guarded``. Without it the shell is not offered at all,
unless the operator sets ``CLAWBOT_SHELL_UNSANDBOXED=allow-host-access``: commands then run
on the host (``clawbot.tools.host_shell``), reaching every file of clawbot's user, and the
risk is ``unsafe``: every call needs a person's confirmation, told what the command reaches.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import Field

from clawbot.agents.beneath import Beneath
from clawbot.agents.workspace import Workspace, shown_path
from clawbot.errors import ToolError
from clawbot.security.reach import WHOLE, Reach, Root
from clawbot.settings import Settings
from clawbot.tools.host_shell import HOST_ACCESS, HOST_REACH, run_on_host
from clawbot.tools.processes import Outcome, clean_environment
from clawbot.tools.registry import Tool, ToolContext, make_tool
from clawbot.tools.sandbox import (
    INSIDE_WORKSPACE,
    INSTALL_HINT,
    Bubblewrap,
    Mount,
    run_in_sandbox,
)
from clawbot.tools.shell_paths import Place, check_command, working_folder

log = logging.getLogger(__name__)

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
SANDBOXED_NOTE = (
    " It runs in a sandbox: the workspace is /workspace, /tmp is empty and private, the"
    " system's programs are read-only, and nothing else of the host is there."
)
ON_HOST_NOTE = f"Unsandboxed: {HOST_REACH}."
"""What a person asked to approve an unsandboxed command reads under it."""
FOLDER_HINT = "give a folder relative to the workspace, or leave cwd out"
T = TypeVar("T")
ENABLE_HINT = (
    f"{INSTALL_HINT}, or set CLAWBOT_SHELL_UNSANDBOXED={HOST_ACCESS} to run commands on the host"
)


def shell_tools(sandbox: Bubblewrap | None, settings: Settings | None) -> tuple[Tool, ...]:
    """``shell_exec`` as this host can run it: sandboxed, or on the host when the operator
    allowed that, or not at all (``clawbot doctor`` says why and how to enable it)."""
    if sandbox is None and (settings is None or settings.shell_unsandboxed != HOST_ACCESS):
        log.info("shell_exec is not offered: bubblewrap cannot run here (%s)", ENABLE_HINT)
        return ()
    return (shell_tool(sandbox),)


def _open_mounts(workspace: Workspace, reach: Reach) -> list[Mount]:
    """The reach's folders as sandbox mounts, each opened beneath the workspace's root (as
    the file tools open paths) with the reach checked on where that walk leads; bubblewrap
    mounts each by this descriptor, so a folder swapped for a link after its check is not
    what gets mounted. A folder missing, leading out, or leading to a folder the reach does
    not hold so is left out (an agent's folder replaced by a link to the workspace's root
    must not bring the root in). The caller closes the descriptors (``_close``)."""
    mounts: list[Mount] = []
    try:
        with Beneath.open(workspace.root) as root:
            for kept in _mounted_roots(reach):
                fd = _open_root(root, kept, reach)
                if fd is not None:
                    where = f"{INSIDE_WORKSPACE}/{kept.path}"
                    target = INSIDE_WORKSPACE if kept.path == WHOLE else where
                    mounts.append(Mount(fd, target, kept.write))
    except BaseException:
        _close(mounts)
        raise
    return mounts


def _mounted_roots(reach: Reach) -> list[Root]:
    """The roots to mount: each but those inside another root that allows as much (the
    outer mount shows them already, as the file tools' reach does). What is left nests only
    a writable folder in a read-only one."""
    return [
        root
        for root in reach.roots
        if not any(
            other.path != root.path and other.holds(root.path) and (other.write or not root.write)
            for other in reach.roots
        )
    ]


def _open_root(root: Beneath, kept: Root, reach: Reach) -> int | None:
    """The folder of ``kept`` opened beneath ``root``, None when it is missing or its walk
    leads out of the reach (as ``kept`` allows: a writable root must lead where the reach
    may write)."""

    def check(relative: str) -> None:
        reach.check(relative, shown_path(kept.path), write=kept.write)

    try:
        return root.open_folder(kept.path, check=check)
    except (OSError, ToolError):
        return None


def _close(mounts: list[Mount]) -> None:
    for mount in mounts:
        os.close(mount.fd)


def _open_working_folder(workspace: Workspace, relative: str, reach: Reach) -> int:
    """The command's folder on the host, opened beneath the workspace's root (the reach
    checked on where the walk leads): the command starts in this descriptor's folder, never
    in the name looked up again."""
    shown = shown_path(relative)

    def check(path: str) -> None:
        reach.check(path, shown, write=False)

    try:
        with Beneath.open(workspace.root) as root:
            return root.open_folder(relative, check=check)
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            reason = "leads outside the workspace (through a link)"
        elif exc.errno == errno.ENOENT:
            reason = "no longer exists"
        elif exc.errno == errno.ENOTDIR:
            reason = "is not a folder"
        else:
            reason = f"cannot be opened ({(exc.strerror or 'error').lower()})"
        raise ToolError(f"the working folder {shown} {reason}", hint=FOLDER_HINT) from None


async def _opened(open_: Callable[[], T], close: Callable[[T], None]) -> T:
    """``open_()`` in a worker thread (a slow disk never stalls the loop); what it opens is
    closed even when the call is stopped meanwhile (the thread runs on to its end)."""
    opening = asyncio.ensure_future(asyncio.to_thread(open_))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:

        def close_when_done(done: asyncio.Future[T]) -> None:
            if not done.cancelled() and done.exception() is None:
                close(done.result())

        opening.add_done_callback(close_when_done)
        raise


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
    run on the host (risk ``unsafe``), which its calls check the settings allow."""

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
            mounts = await _opened(functools.partial(_open_mounts, workspace, reach), _close)
            try:
                outcome = await run_in_sandbox(
                    sandbox,
                    [SHELL, "-c", command],
                    mounts=mounts,
                    cwd=inside,
                    network=settings.shell_network,
                    env=clean_environment("/tmp"),
                    timeout=limit,
                    limit=settings.shell_max_output,
                )
            finally:
                _close(mounts)
        else:
            folder = await _opened(
                functools.partial(_open_working_folder, workspace, relative, reach), os.close
            )
            try:
                home = await asyncio.to_thread(tempfile.mkdtemp, prefix="clawbot-shell-")
                try:
                    outcome = await run_on_host(
                        command,
                        shell=SHELL,
                        folder=folder,
                        env=clean_environment(home),
                        timeout=limit,
                        limit=settings.shell_max_output,
                    )
                finally:  # whatever the command left in its home (off the loop: it may be big)
                    await asyncio.to_thread(shutil.rmtree, home, True)
            finally:
                os.close(folder)
        return _report(outcome, limit)

    async def checked_place(ctx: ToolContext, command: str, cwd: str | None) -> Place:
        """Where the command would run, once its folder and the paths it names pass the
        session's reach (see ``shell_paths``); a ToolError otherwise."""
        if sandbox is None and ctx.settings.shell_unsandboxed != HOST_ACCESS:
            raise ToolError(
                "shell_exec cannot run here: bubblewrap cannot, and running commands on the "
                "host is not allowed",
                hint=ENABLE_HINT,
            )
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
        approval_note="" if sandbox is not None else ON_HOST_NOTE,
    )
