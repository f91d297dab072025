"""A coordinator's scratchpad: one folder per coordinator session inside the workspace
(``scratchpad/<session folder>/``) for what a coordination needs to keep at hand, such as
worker specs, findings, the synthesized spec and todo lists.

Three tools, ``scratchpad_write(name, content)``, ``scratchpad_read(name)`` and
``scratchpad_list()``, in ``group:scratchpad``: only a coordinator holds them. A name is one
plain file name (no folders, no ``..``), and the file is used through the file tools, so the
workspace confinement holds (regular, singly linked files only, links that lead out
refused); a link that leads out of the session's folder is refused too. Nothing is checked
and then used again by name: the folder is listed (and its notes counted) through the
descriptor its checked walk opened, and the file tools run with their reach narrowed to the
folder, so their own walk keeps a note in it whatever is swapped in meanwhile. A file holds
at most ``MAX_NOTE_CHARS`` characters and a scratchpad at most ``MAX_NOTES`` files.

The task notifications a coordinator's turn answers are also kept there
(``notification-<task id>-<run id>.xml``), so they can be read again later.

The folder is an ordinary workspace folder: a worker with file tools may read or write it
when the coordinator tells it the path, which each tool result names.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated

from pydantic import Field

from clawbot.agents.beneath import Beneath, Check
from clawbot.agents.profiles import SCRATCHPAD_GROUP
from clawbot.agents.workspace import Workspace, shown_path
from clawbot.errors import ClawbotError, MalformedMetaError, ToolError, WorkspaceError
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import child_id_of
from clawbot.runtime.plugins import TurnPlugin, TurnStart
from clawbot.security.reach import Reach, Root
from clawbot.subagents.notifications import task_notification
from clawbot.subagents.records import AnnouncePayload, headers_of, parse_meta, payloads_in
from clawbot.tools.files import file_read, file_write
from clawbot.tools.registry import Tool, ToolContext, make_tool

log = logging.getLogger("clawbot.subagents")

SCRATCHPAD_DIR = "scratchpad"
SCRATCHPAD_WRITE = "scratchpad_write"
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


def _narrowed(ctx: ToolContext, folder: str) -> ToolContext:
    """``ctx`` with its reach narrowed to the scratchpad folder (as far as the session's
    own reach allows it): the file tools then check, on every path their walk follows,
    that it stays in the folder, so a link swapped in after any look cannot lead a note out
    of it."""

    async def reach() -> Reach:
        return Reach((Root(folder, write=True),)).within(await ctx.reach())

    return replace(ctx, reach=reach)


def _in_folder(folder: str, shown: str) -> Check:
    """The walk's check: the path it follows stays in ``folder``."""

    def check(relative: str) -> None:
        if relative != folder and not relative.startswith(folder + "/"):
            raise WorkspaceError(f"{shown} leads out of your scratchpad (through a link)")

    return check


def _open_folder(ctx: ToolContext, folder: str) -> int | None:
    """The scratchpad folder opened beneath the workspace's root, its walk kept in the
    folder (the folder itself is no link elsewhere); None while it does not exist."""
    try:
        with Beneath.open(Workspace(ctx.workspace).root) as root:
            return root.open_folder(folder, check=_in_folder(folder, folder))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unusable(exc) from None


def _notes(ctx: ToolContext, folder: str) -> list[str]:
    """The files of the scratchpad, listed through the folder it opened and checked (so
    what is counted is that folder, not a name looked up again)."""
    fd = _open_folder(ctx, folder)
    if fd is None:
        return []
    try:
        with os.scandir(fd) as entries:
            return sorted(e.name for e in entries if not e.is_dir(follow_symlinks=False))
    except OSError as exc:
        raise _unusable(exc) from None
    finally:
        os.close(fd)


def _exists(ctx: ToolContext, path: str, name: str) -> bool:
    """Whether the note ``path`` exists, looked up beneath the workspace's root as the
    file tools do; a link that leads out of the scratchpad is refused with its reason."""
    check = _in_folder(folder_of(ctx.session.key), shown_path(name))
    try:
        with Beneath.open(Workspace(ctx.workspace).root) as root:
            root.look(path, check=check)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            raise WorkspaceError(
                f"{shown_path(name)} leads outside the workspace (through a link)"
            ) from None
        raise _unusable(exc) from None
    return True


def _unusable(exc: OSError) -> ToolError:
    return ToolError(
        f"your scratchpad folder cannot be used ({(exc.strerror or 'error').lower()})",
        hint="tell the user",
    )


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
    folder = folder_of(ctx.session.key)
    await asyncio.to_thread(_exists, ctx, path, name)  # a link out: refused, saying why
    existing = await asyncio.to_thread(_notes, ctx, folder)
    if name not in existing and len(existing) >= MAX_NOTES:
        raise ToolError(
            f"the scratchpad is full ({MAX_NOTES} files)",
            hint="overwrite a file you no longer need",
        )
    await file_write(path, content, _narrowed(ctx, folder))
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
    if not await asyncio.to_thread(_exists, ctx, path, name):
        raise ToolError(
            f"your scratchpad has no file {name}", hint="scratchpad_list shows what it holds"
        )
    return await file_read(path, _narrowed(ctx, folder_of(ctx.session.key)))


async def scratchpad_list(ctx: ToolContext) -> str:
    """List the files in your scratchpad."""
    folder = folder_of(ctx.session.key)
    notes = await asyncio.to_thread(_notes, ctx, folder)
    if not notes:
        return f"Your scratchpad ({folder}) is empty."
    more = [f"[{len(notes) - MAX_NOTES} more files]"] if len(notes) > MAX_NOTES else []
    return f"Your scratchpad ({folder}):\n" + "\n".join(notes[:MAX_NOTES] + more)


async def keep_notifications(ctx: ToolContext, inputs: Sequence[TranscriptEntry]) -> int:
    """Copy the task notifications a coordinator's turn answers into its scratchpad, as
    ``notification-<task id>-<run id>.xml``, so it can read them again in later turns. A
    copy that cannot be written (a full scratchpad, a full disk) is logged, never a failed
    turn; writing one again (a resumed turn) rewrites the same file. Returns how many were
    written."""
    written = 0
    for value in (value for meta in headers_of(inputs) for value in payloads_in(meta)):
        try:
            payload = parse_meta(AnnouncePayload, value, "announce payload")
        except MalformedMetaError:
            continue  # the turn shows it as unreadable; there is nothing to keep
        task_id = child_id_of(payload.source_session_key) or "worker"
        name = _UNSAFE.sub("_", f"notification-{task_id}-{payload.source_run_id}")[:96]
        try:
            await scratchpad_write(f"{name}.xml", task_notification(payload), ctx)
        except (ClawbotError, OSError) as exc:
            log.warning("task notification %s not kept in the scratchpad: %s", name, exc)
            continue
        written += 1
    return written


def scratchpad_tools() -> list[Tool]:
    return [
        make_tool(scratchpad_write, risk="guarded", groups=GROUPS, refusal=REFUSAL),
        make_tool(scratchpad_read, risk="safe", groups=GROUPS, refusal=REFUSAL),
        make_tool(scratchpad_list, risk="safe", groups=GROUPS, refusal=REFUSAL),
    ]


class CoordinatorNotes(TurnPlugin):
    """A coordinator that holds the scratchpad keeps the task notifications its turn
    answers there (``keep_notifications``), before the turn's first model call."""

    name = "coordinator_notes"

    async def turn_started(self, turn: TurnStart) -> None:
        if not turn.agent.coordinator or SCRATCHPAD_WRITE not in turn.tool_names:
            return
        if any(payloads_in(meta) for meta in headers_of(turn.inputs)):
            await keep_notifications(turn.tool_context(), turn.inputs)
