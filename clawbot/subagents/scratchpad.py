"""A coordinator's scratchpad: one folder per coordinator session inside the workspace
(``scratchpad/<session folder>/``) for what a coordination needs to keep at hand, such as
worker specs, findings, the synthesized spec and todo lists.

Three tools, ``scratchpad_write(name, content)``, ``scratchpad_read(name)`` and
``scratchpad_list()``, in ``group:scratchpad``: only a coordinator holds them. A name is one
plain file name (no folders, no ``..``), and the file is used through the file tools, so the
workspace confinement holds (regular, singly linked files only, links that lead out
refused); a link that leads out of the session's folder is refused too. A file holds at most
``MAX_NOTE_CHARS`` characters and a scratchpad at most ``MAX_NOTES`` files.

The folder is an ordinary workspace folder: a worker with file tools may read or write it
when the coordinator tells it the path, which each tool result names.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from pathlib import Path
from typing import Annotated

from pydantic import Field

from clawbot.agents import SCRATCHPAD_GROUP
from clawbot.errors import ToolError, WorkspaceError
from clawbot.file_tools import file_read, file_write, list_dir
from clawbot.tools import Tool, ToolContext, make_tool
from clawbot.workspace import Workspace, shown_path

SCRATCHPAD_DIR = "scratchpad"
MAX_NOTE_CHARS = 100_000
MAX_NOTES = 200
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
GROUPS = (SCRATCHPAD_GROUP,)
REFUSAL = "the scratchpad belongs to a coordinator (an agent with coordinator = true)"


def folder_of(session_key: str) -> str:
    """The workspace path of a session's scratchpad: its key made safe for a folder name,
    plus a digest of the key, so two sessions never share one."""
    safe = _UNSAFE.sub("_", session_key).strip("._")[:60] or "session"
    digest = hashlib.sha256(session_key.encode("utf-8")).hexdigest()[:12]
    return f"{SCRATCHPAD_DIR}/{safe}-{digest}"


def _note_path(ctx: ToolContext, name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ToolError(
            f"{shown_path(name)} is not a scratchpad file name",
            hint="use one plain name of letters, digits, '.', '-' and '_' (no folders), "
            "e.g. findings-auth.md",
        )
    return f"{folder_of(ctx.session.key)}/{name}"


def _confined(ctx: ToolContext, path: str) -> Path:
    """The real path of ``path``, refused when a link takes it out of the session's folder
    (the workspace itself refuses links that leave the workspace)."""
    workspace = Workspace(ctx.workspace)
    target = workspace.resolve(path)
    folder = workspace.resolve(folder_of(ctx.session.key))
    if target.parent != folder:
        raise WorkspaceError(f"{shown_path(path)} leads out of your scratchpad (through a link)")
    return target


def _notes(folder: Path) -> list[str]:
    try:
        return sorted(entry.name for entry in os.scandir(folder) if entry.is_file())
    except FileNotFoundError:
        return []


async def scratchpad_write(
    name: Annotated[str, Field(description="a plain file name, e.g. spec.md (no folders)")],
    content: Annotated[str, Field(description="the complete new content of the file")],
    ctx: ToolContext,
) -> str:
    """Create or overwrite a file in your scratchpad (findings, specs, todo lists)."""
    path = _note_path(ctx, name)
    if len(content) > MAX_NOTE_CHARS:
        raise ToolError(
            f"the content is too long ({len(content):,} characters, at most "
            f"{MAX_NOTE_CHARS:,} a file)",
            hint="split it into several files",
        )
    target = await asyncio.to_thread(_confined, ctx, path)
    existing = await asyncio.to_thread(_notes, target.parent)
    if name not in existing and len(existing) >= MAX_NOTES:
        raise ToolError(
            f"the scratchpad is full ({MAX_NOTES} files)",
            hint="overwrite a file you no longer need",
        )
    await file_write(path, content, ctx)
    return (
        f"wrote {len(content)} characters to scratchpad file {name} (workspace path {path}; "
        "a worker with file tools can read it there)"
    )


async def scratchpad_read(
    name: Annotated[str, Field(description="the file's name, as scratchpad_list shows it")],
    ctx: ToolContext,
) -> str:
    """Read a file of your scratchpad (long files: the first 40,000 characters)."""
    path = _note_path(ctx, name)
    target = await asyncio.to_thread(_confined, ctx, path)
    if not await asyncio.to_thread(os.path.lexists, target):
        raise ToolError(
            f"your scratchpad has no file {name}", hint="scratchpad_list shows what it holds"
        )
    return await file_read(path, ctx)


async def scratchpad_list(ctx: ToolContext) -> str:
    """List the files in your scratchpad."""
    folder = folder_of(ctx.session.key)
    resolved = await asyncio.to_thread(Workspace(ctx.workspace).resolve, folder)
    if not await asyncio.to_thread(resolved.is_dir):
        return f"Your scratchpad ({folder}) is empty."
    listing = await list_dir(ctx, folder)
    return f"Your scratchpad ({folder}):\n{listing}"


def scratchpad_tools() -> list[Tool]:
    return [
        make_tool(scratchpad_write, risk="guarded", groups=GROUPS, refusal=REFUSAL),
        make_tool(scratchpad_read, risk="safe", groups=GROUPS, refusal=REFUSAL),
        make_tool(scratchpad_list, risk="safe", groups=GROUPS, refusal=REFUSAL),
    ]
