"""The ``shell_exec`` tool: a command run by bash in the session's workspace.

The command gets a clean environment (``PATH``, ``HOME``, ``LANG``: never a provider key or
a bot token), no standard input, a working folder confined like the file tools' paths, and a
time limit; everything it started is ended with it (``clawbot.tools.processes``). Its output
is read as it comes (the event loop never waits on it) and capped: the start and the end
are kept.

Where bubblewrap works (``clawbot.tools.sandbox``) the command runs inside it with only the
session's reach of the workspace mounted, and no network unless ``CLAWBOT_SHELL_NETWORK``
grants it: the tool's risk is then ``guarded``. Without it the shell is not offered at all,
unless the operator sets ``CLAWBOT_SHELL_UNSANDBOXED=allow-host-access``: commands then run
on the host (``clawbot.tools.host_shell``), reaching every file of clawbot's user, and the
risk is ``unsafe``: every call needs a person's confirmation, told what the command reaches.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from typing import Annotated, Any

from pydantic import Field

from clawbot.errors import ClawbotError, ToolError
from clawbot.reach import WHOLE, Reach
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
from clawbot.workspace import Workspace

log = logging.getLogger(__name__)

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
SANDBOXED_NOTE = (
    " It runs in a sandbox: the workspace is /workspace, /tmp is empty and private, the"
    " system's programs are read-only, and nothing else of the host is there."
)
ON_HOST_NOTE = f"Unsandboxed: {HOST_REACH}."
"""What a person asked to approve an unsandboxed command reads under it."""
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
            outcome = await run_in_sandbox(
                sandbox,
                [SHELL, "-c", command],
                mounts=await asyncio.to_thread(_mounts, workspace, reach),
                cwd=inside,
                network=settings.shell_network,
                env=clean_environment("/tmp"),
                timeout=limit,
                limit=settings.shell_max_output,
            )
        else:
            home = await asyncio.to_thread(tempfile.mkdtemp, prefix="clawbot-shell-")
            try:
                outcome = await run_on_host(
                    command,
                    shell=SHELL,
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
