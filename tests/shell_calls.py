"""Calling ``shell_exec`` as the runtime does, for the shell's tests (and their probe,
tests/shell_probe.py, which runs one call in a process of its own)."""

from __future__ import annotations

import base64
from pathlib import Path

from clawbot.messages import ToolCallBlock
from clawbot.routing.sessions import Session
from clawbot.security.reach import Reach
from clawbot.settings import Settings
from clawbot.tools.registry import ToolContext, ToolRegistry
from clawbot.tools.sandbox import Bubblewrap
from clawbot.tools.shell import shell_tool

SECRET = "top secret"
PROVIDER_KEY = "sk-proj-shellmustnotseethis0123456789"
BOT_TOKEN = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ012345678"


def on_host(**fields: object) -> Settings:
    """Settings that allow commands on the host without bubblewrap (the operator's opt-in)."""
    return Settings(_env_file=None, shell_unsandboxed="allow-host-access", **fields)  # type: ignore[call-arg, arg-type]


def make_workspace(tmp_path: Path) -> Path:
    """``tmp_path/ws`` with a file and a folder, and a secret beside it (outside)."""
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "notes.md").write_text("one\ntwo\n")
    (tmp_path / "outside.txt").write_text(SECRET)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file.txt").write_text(SECRET)
    return root


async def run(
    workspace: Path,
    command: str,
    *,
    sandbox: Bubblewrap | None = None,
    reach: Reach | None = None,
    settings: Settings | None = None,
    **arguments: object,
) -> tuple[str, bool]:
    """The call's result and whether it is an error. Without a sandbox the settings allow
    running on the host unless ``settings`` are given."""

    async def session_reach() -> Reach:
        return reach if reach is not None else Reach.whole()

    if settings is None:
        settings = on_host() if sandbox is None else Settings(_env_file=None)  # type: ignore[call-arg]
    context = ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="main"),
        workspace=workspace,
        settings=settings,
        reach=session_reach,
    )
    call = ToolCallBlock(id="1", name="shell_exec", arguments={"command": command, **arguments})
    result = await ToolRegistry([shell_tool(sandbox)]).execute(call, context)
    return result.content, result.is_error


def running(marker: str) -> list[int]:
    """Processes whose command line is ``sleep <marker>`` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline == f"sleep\0{marker}\0".encode():
                found.append(int(entry.name))
    return found


def hidden(text: str) -> str:
    """A shell expression that prints ``text`` without spelling it (past the text checks)."""
    return f'"$(echo {base64.b64encode(text.encode()).decode()} | base64 -d)"'
