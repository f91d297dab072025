"""Built-in file tools, all confined to the session's workspace."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from clawbot.errors import ToolError
from clawbot.tools import Tool, ToolContext, make_tool
from clawbot.workspace import Workspace

MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 500


def _workspace(ctx: ToolContext) -> Workspace:
    return Workspace(ctx.workspace)


async def file_read(
    path: Annotated[str, Field(description="file path relative to the workspace")],
    ctx: ToolContext,
) -> str:
    """Read a UTF-8 text file from the workspace."""
    target = _workspace(ctx).resolve(path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}", hint="use list_dir to see what exists")
    text = target.read_text(encoding="utf-8", errors="replace")
    if len(text) > MAX_READ_CHARS:
        return text[:MAX_READ_CHARS] + f"\n[truncated: the file has {len(text)} characters]"
    return text


async def file_write(
    path: Annotated[str, Field(description="file path relative to the workspace")],
    content: Annotated[str, Field(description="the complete new content of the file")],
    ctx: ToolContext,
) -> str:
    """Create or overwrite a text file in the workspace (parent folders are created)."""
    target = _workspace(ctx).resolve(path)
    if target.is_dir():
        raise ToolError(f"{path} is a folder, not a file")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return f"wrote {len(content)} characters to {path}"


async def file_edit(
    path: Annotated[str, Field(description="file path relative to the workspace")],
    old_text: Annotated[str, Field(description="exact text to replace; must occur once")],
    new_text: Annotated[str, Field(description="replacement text")],
    ctx: ToolContext,
) -> str:
    """Replace one exact, unique occurrence of a piece of text in a workspace file."""
    target = _workspace(ctx).resolve(path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}", hint="use file_write to create it")
    if not old_text:
        raise ToolError("old_text is empty", hint="give the exact text to replace")
    text = target.read_text(encoding="utf-8")
    found = text.count(old_text)
    if found == 0:
        raise ToolError(
            f"old_text was not found in {path}", hint="read the file and copy it exactly"
        )
    if found > 1:
        raise ToolError(
            f"old_text occurs {found} times in {path}", hint="include more context so it is unique"
        )
    target.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
    return f"edited {path}"


async def list_dir(
    ctx: ToolContext,
    path: Annotated[str, Field(description="folder relative to the workspace")] = ".",
) -> str:
    """List a workspace folder: one entry per line, folders end with '/'."""
    workspace = _workspace(ctx)
    target = workspace.resolve(path)
    if not target.is_dir():
        raise ToolError(f"no such folder: {path}")
    entries = sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    lines = [f"{p.name}/" if p.is_dir() else p.name for p in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries]")
    return "\n".join(lines) if lines else "(empty folder)"


def file_tools() -> list[Tool]:
    return [
        make_tool(file_read, risk="safe", groups=("group:files",)),
        make_tool(file_write, risk="guarded", groups=("group:files",)),
        make_tool(file_edit, risk="guarded", groups=("group:files",)),
        make_tool(list_dir, risk="safe", groups=("group:files",)),
    ]
