"""One ``shell_exec`` call in a process of its own, for the tests that need clawbot's
process itself: its environment as it started (``/proc/<pid>/environ``), its privileges, or
its sudden death. ``python -m tests.shell_probe WORKSPACE MODE COMMAND`` prints the result.

MODE: ``host`` (on the host, allowed), ``host-unprivileged`` (the same from a process that
first gives up every capability: clawbot run by an ordinary user, as far as the kernel's
checks between two processes of one user go, although these tests run as root) or
``sandboxed`` (in bubblewrap).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from clawbot.tools.reaper import drop_privileges
from clawbot.tools.sandbox import find_bubblewrap

from .shell_calls import run

MODES = ("host", "host-unprivileged", "sandboxed")


async def main(workspace: Path, mode: str, command: str) -> None:
    if mode not in MODES:
        raise SystemExit(f"MODE is one of {', '.join(MODES)}")
    if mode == "host-unprivileged":
        drop_privileges()
    sandbox = find_bubblewrap() if mode == "sandboxed" else None
    content, _ = await run(workspace, command, sandbox=sandbox, timeout=60)
    sys.stdout.write(content)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
