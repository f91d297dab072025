"""Built-in file tools, all confined to the session's workspace.

Only regular files and folders are touched. A named pipe, socket or device can block a read
or write for ever, and a regular file with a second hard link may also be a file outside the
workspace (a link cannot be told from the original). So every file is opened without blocking
(``O_NONBLOCK``) and checked with ``fstat`` on the open descriptor. Every path is opened
beneath the workspace's root descriptor, one name at a time (:mod:`clawbot.agents.beneath`), and the
session's reach is checked on the path as that walk follows it: no name is looked up twice,
so nothing swapped in between the check and the use (a link, by a subagent's shell) leads
out. The I/O runs in a worker thread, so a slow disk never stalls the event loop and the turn
deadline can always fire.

Errors are one short sentence naming the path as the model gave it (shortened), never the
workspace's place on the host.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

from pydantic import Field

from clawbot.agents.beneath import Beneath, Check, NotOpenable
from clawbot.agents.workspace import Workspace, checked_path, shown_path
from clawbot.errors import ToolError
from clawbot.security.reach import ALWAYS_READABLE
from clawbot.tools.registry import MAX_RESULT_CHARS, Tool, ToolContext, ToolPrecheck, make_tool

MAX_READ_CHARS = min(40_000, MAX_RESULT_CHARS - 200)
"""What one ``file_read`` returns: below the tool result limit, so it is never cut twice."""
READ_CHUNK_BYTES = 64 * 1024
MAX_EDIT_BYTES = 2_000_000
"""``file_edit`` rewrites the whole file in memory; bigger files are refused, not loaded."""
MAX_LIST_ENTRIES = 500

P = ParamSpec("P")
T = TypeVar("T")

_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _workspace(ctx: ToolContext) -> Workspace:
    """The turn's workspace; it may have been deleted while clawbot runs."""
    if not ctx.workspace.is_dir():
        raise ToolError(
            "the workspace folder no longer exists",
            hint="tell the user; clawbot re-creates the default workspace when it next starts",
        )
    return Workspace(ctx.workspace)


def _file_path(path: str) -> str:
    if not path.strip():
        raise ToolError("the path is empty", hint="give a file path relative to the workspace")
    return path


def _refuse_unless_plain_file(info: os.stat_result, shown: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a folder, not a file", hint="use list_dir to see inside it")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise ToolError(
            f"{shown} is {kind}, and file tools only use regular files",
            hint="choose another path",
        )
    if info.st_nlink > 1:
        raise ToolError(
            f"{shown} has {info.st_nlink} hard links, so it may also be a file outside the "
            "workspace, and file tools refuse such files",
            hint="ask the user to replace it with a plain copy if it is meant to be used here",
        )


@dataclass(frozen=True)
class _Target:
    """A path of the workspace as a tool uses it: the open root it is walked beneath, the
    path (checked text), the reach check the walk applies, and the path as errors show it."""

    root: Beneath
    path: str
    check: Check
    shown: str


def _open_plain_file(
    target: _Target, flags: int, *, missing_hint: str, make_parents: bool = False
) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular, singly linked file ``target``, else a ToolError."""
    try:
        fd = target.root.open_file(
            target.path, flags, check=target.check, make_parents=make_parents
        )
    except NotOpenable as exc:  # a pipe or socket nobody reads: say which it is
        _refuse_unless_plain_file(exc.info, target.shown)
        raise _os_error(exc, target.shown) from None
    except OSError as exc:
        raise _os_error(exc, target.shown, missing_hint=missing_hint) from None
    try:
        info = os.fstat(fd)
        _refuse_unless_plain_file(info, target.shown)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _os_error(exc: OSError, shown: str, *, missing_hint: str = "") -> ToolError:
    """One short sentence for a file system error: ``str(exc)`` holds the host's path."""
    code = exc.errno
    if code == errno.ENOENT:
        return ToolError(f"no such file: {shown}", hint=missing_hint or None)
    if code == errno.EISDIR:
        return ToolError(f"{shown} is a folder, not a file", hint="use list_dir to see inside it")
    if code in (errno.ENOTDIR, errno.EEXIST):
        return ToolError(f"part of {shown} is a file where a folder is needed")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ToolError(f"{shown} may not be changed or read here (permission denied)")
    if code == errno.ELOOP:
        return ToolError(
            f"{shown} cannot be followed (its links form a loop)",
            hint="use a path without that link",
        )
    if code == errno.EXDEV:
        return ToolError(
            f"{shown} leads outside the workspace (through a link)",
            hint="use a path relative to the workspace, without links that leave it",
        )
    if code == errno.ENAMETOOLONG:
        return ToolError(f"the path {shown} is too long for the file system")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return ToolError("the disk is full", hint="tell the user")
    reason = (exc.strerror or type(exc).__name__).lower()
    return ToolError(f"{shown} could not be used: {reason}")


def _read_start(target: _Target) -> str:
    """The file's first MAX_READ_CHARS characters, reading little more than that."""
    fd, info = _open_plain_file(target, os.O_RDONLY, missing_hint="use list_dir to see what exists")
    with os.fdopen(fd, "rb") as file:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""
        while len(text) <= MAX_READ_CHARS:
            chunk = file.read(READ_CHUNK_BYTES)
            if not chunk:
                return text + decoder.decode(b"", final=True)
            text += decoder.decode(chunk)
    return text[:MAX_READ_CHARS] + (
        f"\n[truncated: the first {MAX_READ_CHARS:,} characters of a {info.st_size:,}-byte file]"
    )


def _read_device(path: str) -> str:
    """One of the always-readable devices: at most MAX_READ_CHARS bytes of it (``/dev/null``
    reads empty; the others never end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, path) from None
    with os.fdopen(fd, "rb") as device:
        if not stat.S_ISCHR(os.fstat(device.fileno()).st_mode):
            raise ToolError(f"{path} is not the device it should be here")
        data = device.read(MAX_READ_CHARS)
    text = data.decode("utf-8", errors="replace")
    if len(data) < MAX_READ_CHARS:
        return text
    return text + f"\n[truncated: the first {MAX_READ_CHARS:,} bytes of a device that never ends]"


def _write_whole(target: _Target, content: str) -> None:
    data = content.encode("utf-8")
    # No O_TRUNC: a file is emptied only once it is known to be a plain one.
    fd, _ = _open_plain_file(target, os.O_WRONLY | os.O_CREAT, missing_hint="", make_parents=True)
    with os.fdopen(fd, "wb") as file:
        file.truncate(0)
        file.write(data)


def _replace_once(target: _Target, old_text: str, new_text: str) -> None:
    fd, _ = _open_plain_file(target, os.O_RDWR, missing_hint="use file_write to create it")
    shown = target.shown
    with os.fdopen(fd, "r+b") as file:
        raw = file.read(MAX_EDIT_BYTES + 1)
        if len(raw) > MAX_EDIT_BYTES:
            raise ToolError(
                f"{shown} is too big to edit (over {MAX_EDIT_BYTES:,} bytes)",
                hint="use file_write to replace it, or ask the user",
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(
                f"{shown} is not UTF-8 text, and file_edit only changes text",
                hint="use file_write to replace it",
            ) from None
        found = text.count(old_text)
        if found == 0:
            raise ToolError(
                f"old_text was not found in {shown}", hint="read the file and copy it exactly"
            )
        if found > 1:
            raise ToolError(
                f"old_text occurs {found} times in {shown}",
                hint="include more context so it is unique",
            )
        file.seek(0)
        file.write(text.replace(old_text, new_text, 1).encode("utf-8"))
        file.truncate()


def _list_entries(target: _Target) -> str:
    """The folder's entries, folders first; a link is listed by its name, never followed."""
    shown = target.shown
    try:
        fd = target.root.open_folder(target.path, check=target.check)
        try:
            with os.scandir(fd) as found:
                entries = sorted((not e.is_dir(follow_symlinks=False), e.name) for e in found)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise ToolError(f"no such folder: {shown}") from None
        if exc.errno == errno.ENOTDIR:
            raise ToolError(f"{shown} is not a folder", hint="use file_read for a file") from None
        raise _os_error(exc, shown) from None
    lines = [name if is_file else f"{name}/" for is_file, name in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries]")
    return "\n".join(lines) if lines else "(empty folder)"


async def _off_loop(
    ctx: ToolContext,
    path: str,
    write: bool,
    work: Callable[Concatenate[_Target, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """Do ``work`` on ``path`` beneath the workspace's root, the session's reach (asked
    now: a subagent's narrows with its parent's) checked on where the path leads, all in a
    worker thread (every ``stat`` may wait on a slow disk); any leftover OSError becomes a
    short ToolError."""
    shown = shown_path(path)
    reach = await ctx.reach()

    def check(relative: str) -> None:
        reach.check(relative, shown, write=write)

    def confined() -> T:
        workspace = _workspace(ctx)
        if reach.folder_to_make is not None:  # an agent's folder exists from its first call
            workspace.ensure_folder(reach.folder_to_make)
        relative = checked_path(path)
        try:
            with Beneath.open(workspace.root) as root:
                return work(_Target(root, relative, check, shown), *args, **kwargs)
        except OSError as exc:
            raise _os_error(exc, shown) from None

    return await asyncio.to_thread(confined)


async def file_read(
    path: Annotated[str, Field(description="file path relative to the workspace")],
    ctx: ToolContext,
) -> str:
    """Read a UTF-8 text file from the workspace (long files: the first 40,000 characters)."""
    if path in ALWAYS_READABLE:
        return await asyncio.to_thread(_read_device, path)
    return await _off_loop(ctx, _file_path(path), False, _read_start)


async def file_write(
    path: Annotated[str, Field(description="file path relative to the workspace")],
    content: Annotated[str, Field(description="the complete new content of the file")],
    ctx: ToolContext,
) -> str:
    """Create or overwrite a text file in the workspace (parent folders are created)."""
    await _off_loop(ctx, _file_path(path), True, _write_whole, content)
    return f"wrote {len(content)} characters to {path}"


async def file_edit(
    path: Annotated[str, Field(description="file path relative to the workspace")],
    old_text: Annotated[str, Field(description="exact text to replace; must occur once")],
    new_text: Annotated[str, Field(description="replacement text")],
    ctx: ToolContext,
) -> str:
    """Replace one exact, unique occurrence of a piece of text in a workspace file."""
    if not old_text:
        raise ToolError("old_text is empty", hint="give the exact text to replace")
    await _off_loop(ctx, _file_path(path), True, _replace_once, old_text, new_text)
    return f"edited {path}"


async def list_dir(
    ctx: ToolContext,
    path: Annotated[str, Field(description="folder relative to the workspace")] = ".",
) -> str:
    """List a workspace folder: one entry per line, folders end with '/'."""
    return await _off_loop(ctx, path, False, _list_entries)


async def file_bytes(ctx: ToolContext, path: str, limit: int, limit_text: str) -> bytes:
    """The whole of a workspace file, opened as every file tool opens one (beneath the
    workspace's root, the session's reach checked on the walk, a plain file only), refused
    past ``limit`` bytes with ``limit_text`` naming the limit: for tools that hand a file on
    (``send_file``)."""
    return await _off_loop(ctx, _file_path(path), False, _read_whole, limit, limit_text)


async def file_size(ctx: ToolContext, path: str) -> int:
    """The size of a workspace file, opened as :func:`file_bytes` opens it (a precheck's)."""
    return await _off_loop(ctx, _file_path(path), False, _size)


def _read_whole(target: _Target, limit: int, limit_text: str) -> bytes:
    fd, info = _open_plain_file(target, os.O_RDONLY, missing_hint="use list_dir to see what exists")
    with os.fdopen(fd, "rb") as file:
        if info.st_size > limit:
            raise too_big(target.shown, info.st_size, limit_text)
        data = file.read(limit + 1)  # it may have grown since
    if len(data) > limit:
        raise too_big(target.shown, len(data), limit_text)
    return data


def _size(target: _Target) -> int:
    fd, info = _open_plain_file(target, os.O_RDONLY, missing_hint="use list_dir to see what exists")
    os.close(fd)
    return info.st_size


def too_big(shown: str, size: int, limit_text: str) -> ToolError:
    return ToolError(
        f"{shown} is {size:,} bytes, over {limit_text}",
        hint="send a smaller file: compress it, or split it into parts",
    )


def _within_reach(*, write: bool) -> ToolPrecheck:
    """A file tool's precheck: its path resolves in the workspace and the session may read
    it (or write it), so nobody is asked to approve a call its reach refuses anyway."""

    async def precheck(arguments: Any, ctx: ToolContext) -> None:
        path: str = arguments.path
        if not write and path in ALWAYS_READABLE:
            return
        await _off_loop(ctx, _file_path(path), write, _found)

    return precheck


def _found(target: _Target) -> None:
    """Walk the path as far as it exists, so the reach sees where it leads; a missing file
    (or folder) is no reason to refuse: writing makes it."""
    with contextlib.suppress(FileNotFoundError):
        target.root.look(target.path, check=target.check)


def file_tools() -> list[Tool]:
    reads, writes = _within_reach(write=False), _within_reach(write=True)
    return [
        make_tool(file_read, risk="safe", groups=("group:files",), precheck=reads),
        make_tool(file_write, risk="guarded", groups=("group:files",), precheck=writes),
        make_tool(file_edit, risk="guarded", groups=("group:files",), precheck=writes),
        make_tool(list_dir, risk="safe", groups=("group:files",), precheck=reads),
    ]
