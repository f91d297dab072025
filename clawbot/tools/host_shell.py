"""Shell commands run on the host: only where bubblewrap cannot run, and only once the
operator allowed it with ``CLAWBOT_SHELL_UNSANDBOXED=allow-host-access``.

Such a command runs as clawbot's own user, so it reaches every file that user can read or
write: the ``.env`` with the API keys and tokens, the home's database with every transcript,
``~/.ssh``. Nothing can hold a same-user program off those; ``HOST_REACH`` says so to the
operator (``clawbot doctor``) and to whoever approves a call. What does hold:

- clawbot makes itself non-dumpable before its first such command, and the command runs
  with no capability (``clawbot.tools.reaper``), so ``/proc/<clawbot>/environ`` and its
  memory stay closed to it, as root too;
- every process it starts ends with the call: it runs under its keeper (the reaper, a child
  subreaper that kills what is left when the command ends or clawbot goes), and clawbot,
  itself a child subreaper, sweeps up whatever the command detached from a keeper it killed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sys
from pathlib import Path

from clawbot.errors import ToolError
from clawbot.tools import reaper
from clawbot.tools.processes import GONE_CHECK_SECONDS, GONE_CHECKS, RUNNING, Outcome, run_command

log = logging.getLogger(__name__)

HOST_ACCESS = "allow-host-access"
"""The value of ``CLAWBOT_SHELL_UNSANDBOXED`` that lets the shell run without bubblewrap."""
HOST_REACH = (
    "it runs on the host, unsandboxed, as the bot's user: it can read and change every file "
    "that user can — the .env with the API keys and tokens, the database with every "
    "transcript, ~/.ssh — and use the network (clawbot's own environment and memory stay "
    "closed to it, and whatever it starts is ended with it)"
)
"""What an unsandboxed command reaches, as the doctor, the approval request and the docs say."""
PR_SET_DUMPABLE = 4
REAPER = Path(reaper.__file__)


@functools.cache
def guard_clawbot() -> None:
    """Once per process, before its first command on the host: clawbot becomes
    non-dumpable (its ``/proc/<pid>/environ`` and memory close to other processes of its
    user) and a child subreaper (what a command detaches is reparented to it, not to init,
    so the sweep finds it)."""
    try:
        reaper.prctl(PR_SET_DUMPABLE, 0)
        reaper.prctl(reaper.PR_SET_CHILD_SUBREAPER, 1)
    except OSError as exc:
        raise ToolError(
            f"cannot guard clawbot before running a command on the host ({exc})",
            hint="install bubblewrap so commands run sandboxed",
        ) from exc


async def run_on_host(
    command: str, *, shell: str, folder: int, env: dict[str, str], timeout: float, limit: int
) -> Outcome:
    """Run ``shell -c command`` under its keeper, and end every process it started. It
    starts in the folder open as ``folder`` (entered through the descriptor, never its name
    looked up again: a folder swapped for a link after its check is not where it starts)."""
    guard_clawbot()
    before = set(await asyncio.to_thread(strays))
    control, keep = os.pipe()  # the keeper's end; clawbot closing ``keep`` (or dying) stops it
    argv = [sys.executable, "-I", "-S", str(REAPER), str(control), shell, "-c", command]

    async def sweep() -> None:
        await _sweep(before)

    try:
        return await run_command(
            argv,
            cwd=f"/proc/self/fd/{folder}",
            env=env,
            timeout=timeout,
            limit=limit,
            pass_fds=(control,),
            after_exit=sweep,
        )
    finally:
        os.close(control)
        os.close(keep)
        await sweep()


def strays() -> list[int]:
    """This process's children that are no command it started itself and sit outside its
    session: processes a command detached (``setsid``) and a killed keeper left behind.
    A command's processes never share clawbot's session, which its own children do."""
    me, session = os.getpid(), os.getsid(0)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in RUNNING:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and int(fields[3]) != session:
            found.append(int(name))
    return found


async def _sweep(before: set[int]) -> None:
    """Kill and reap the strays that were not there before the command, until none is
    left (a killed stray's own children come to clawbot in their turn)."""
    for _ in range(GONE_CHECKS):
        found = [pid for pid in await asyncio.to_thread(strays) if pid not in before]
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        for pid in found:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
        await asyncio.sleep(GONE_CHECK_SECONDS)
    log.warning("processes a shell command left could not all be ended")
