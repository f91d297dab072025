"""The workspace: the folder of bootstrap files an agent's system prompt is built from, and
the only part of the file system the file tools may touch."""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from clawbot.agents.beneath import Beneath
from clawbot.clock import Clock, SystemClock
from clawbot.errors import WorkspaceError

log = logging.getLogger("clawbot.workspace")

RECHECK_SECONDS = 1.0
"""How long the bootstrap files found are trusted before the folders are looked at again."""

AGENT_FOLDERS = "agents"
"""The workspace folder that holds one folder per agent (``agents/<agent_id>/``): its
bootstrap overlays, and for every agent but ``main`` the boundary of its file tools and
shell (``clawbot.security.reach``)."""

BOOTSTRAP_FILES = ("IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md")
MAX_BOOTSTRAP_CHARS = 20_000
MAX_BOOTSTRAP_BYTES = 4 * MAX_BOOTSTRAP_CHARS
"""Read of a bootstrap file: enough for MAX_BOOTSTRAP_CHARS characters of any UTF-8."""

MAX_PATH_CHARS = 1_000
"""Longer workspace paths are refused before the file system sees them (its own limit, and
the error it gives, name the host's absolute path)."""
MAX_NAME_BYTES = 255
SHOWN_PATH_CHARS = 80
"""How much of a path an error message repeats: enough to recognise it, never a 6 KB line."""


def shown_path(relative: str) -> str:
    """``relative`` as an error message may show it: short, and quoted with escapes when it
    holds anything that would not read plainly in one line (spaces at its ends, NUL, quotes)."""
    if len(relative) > SHOWN_PATH_CHARS:
        relative = relative[: SHOWN_PATH_CHARS - 1] + "…"
    plain = relative.isprintable() and relative == relative.strip() and "'" not in relative
    return relative if plain and '"' not in relative else repr(relative)


def agent_folder(agent_id: str) -> str:
    """The workspace path of an agent's own folder."""
    return f"{AGENT_FOLDERS}/{agent_id}"


def checked_path(relative: str) -> str:
    """``relative`` as a workspace path (``.`` for an empty one), or a WorkspaceError for one
    that is absolute, climbs out with ``..`` or would be refused by the file system (NUL, too
    long). Only the text is read: nothing is looked up."""
    if not relative or relative.strip() == "":
        return "."
    shown = shown_path(relative)
    if "\0" in relative:
        raise WorkspaceError(
            f"the path {shown} contains a NUL character",
            hint="give a plain path relative to the workspace",
        )
    if len(relative) > MAX_PATH_CHARS:
        raise WorkspaceError(
            f"the path {shown} is too long ({len(relative):,} characters, at most "
            f"{MAX_PATH_CHARS:,})",
            hint="use a shorter path",
        )
    parts = Path(relative).parts
    if any(len(part.encode("utf-8", "replace")) > MAX_NAME_BYTES for part in parts):
        raise WorkspaceError(
            f"a name in the path {shown} is too long (at most {MAX_NAME_BYTES} bytes a name)",
            hint="use a shorter name",
        )
    if relative.startswith(("/", "~")):
        raise WorkspaceError(f"absolute paths are not allowed: {shown}")
    if ".." in parts:
        raise WorkspaceError(f"'..' is not allowed in workspace paths: {shown}")
    return relative


@dataclass(frozen=True)
class BootstrapFile:
    name: str
    path: Path
    text: str


class Workspace:
    """A folder that must exist; paths inside it are resolved and confined."""

    def __init__(self, root: Path, *, clock: Clock | None = None) -> None:
        if not root.is_dir():
            # The default workspace is re-created at start (clawbot.agents.home), so a missing one
            # was configured explicitly.
            raise WorkspaceError(
                f"the workspace folder {root} does not exist",
                hint="create it, or unset CLAWBOT_WORKSPACE to use the default one in CLAWBOT_HOME",
            )
        self.root = root.resolve()
        self.clock: Clock = clock or SystemClock()
        self._checked: dict[tuple[str, ...], float] = {}
        self._cache: dict[str, tuple[int, str]] = {}
        self._refused: set[str] = set()
        self._bootstrap_cache: dict[
            tuple[str, ...], tuple[list[tuple[int, int, int]], tuple[BootstrapFile, ...]]
        ] = {}

    def resolve(self, relative: str) -> Path:
        """The real path of ``relative`` inside the workspace, or a WorkspaceError.

        Absolute paths, ``..`` that climbs out and symlinks that lead out are all refused, and
        so are paths the file system would reject (NUL, too long): every message shows the
        path as given, shortened, never the workspace's place on the host. The path is looked
        up again when it is used, so this is a check for what runs outside clawbot (the
        sandbox's mounts, the shell's words); the file tools open beneath the root instead
        (:mod:`clawbot.agents.beneath`).
        """
        candidate = Path(checked_path(relative))
        try:
            resolved = (self.root / candidate).resolve()
        except (OSError, RuntimeError):  # a loop of links; the message holds the host path
            raise WorkspaceError(
                f"{shown_path(relative)} cannot be followed (its links form a loop)",
                hint="use a path without that link",
            ) from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise WorkspaceError(
                f"{shown_path(relative)} leads outside the workspace (through a link)"
            )
        return resolved

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path != self.root else "."

    def ensure_folder(self, relative: str) -> None:
        """Create the folder ``relative`` when missing, every folder on its way beneath the
        root and never through a link that leads out: an agent's own folder exists from its
        first tool call on, so its shell can run there and its sandbox can mount it."""
        try:
            with Beneath.open(self.root) as root:
                os.close(root.open_folder(checked_path(relative), make=True))
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise WorkspaceError(
                    f"the folder {shown_path(relative)} leads outside the workspace "
                    "(through a link)"
                ) from None
            raise WorkspaceError(
                f"the folder {shown_path(relative)} cannot be created in the workspace",
                hint="tell the user: a file may stand where the folder should be",
            ) from None

    def bootstrap(
        self, agent_id: str | None = None, *, overlay: bool = True
    ) -> tuple[BootstrapFile, ...]:
        """The bootstrap files that exist, each from the agent's overlay when it has one.

        Runs every turn, so it is cheap. The files found are trusted for ``RECHECK_SECONDS``
        (a person's edit in an editor is noticed within a second; the agent's own writes at
        once, through :meth:`changed`). Then each file is opened beneath the root (as the file
        tools open paths: a link that leads out is not followed) and ``fstat``-ed, and the
        same tuple comes back until a file appears, vanishes or changes.
        """
        folders = self._folders(agent_id if overlay else None)
        now = self.clock.monotonic()
        cached = self._bootstrap_cache.get(folders)
        checked = self._checked.get(folders)
        if cached is not None and checked is not None and now - checked < RECHECK_SECONDS:
            return cached[1]
        self._checked[folders] = now
        found: list[tuple[int, int, os.stat_result] | None] = []
        try:
            with Beneath.open(self.root) as root:
                for name in BOOTSTRAP_FILES:
                    found.append(self._open_first(root, folders, name))
            stamp = [
                (hit[0], hit[2].st_mtime_ns, hit[2].st_size) if hit else (-1, 0, 0) for hit in found
            ]
            if cached is not None and cached[0] == stamp:
                return cached[1]
            files = []
            for name, hit in zip(BOOTSTRAP_FILES, found, strict=True):
                if hit is None:
                    continue
                index, fd, info = hit
                relative = f"{folders[index]}/{name}"
                text = self._read_cached(relative, info.st_mtime_ns, fd)
                if text.strip():
                    files.append(BootstrapFile(name=name, path=self.root / relative, text=text))
        except OSError:  # the workspace itself is gone
            return ()
        finally:
            for hit in found:
                if hit is not None:
                    os.close(hit[1])
        result = tuple(files)
        self._bootstrap_cache[folders] = (stamp, result)
        return result

    def read(self, name: str, agent_id: str | None = None) -> str | None:
        """The text of the workspace file ``name`` (the agent's overlay first), opened
        beneath the root like a bootstrap file; None when there is none."""
        try:
            with Beneath.open(self.root) as root:
                hit = self._open_first(root, self._folders(agent_id), name)
                if hit is None:
                    return None
                index, fd, info = hit
                try:
                    relative = f"{self._folders(agent_id)[index]}/{name}"
                    return self._read_cached(relative, info.st_mtime_ns, fd)
                finally:
                    os.close(fd)
        except OSError:  # the workspace itself is gone
            return None

    def changed(self) -> None:
        """Files may have been written from inside (a tool round): look at the next call."""
        self._checked.clear()

    def _folders(self, agent_id: str | None) -> tuple[str, ...]:
        """Where bootstrap files are looked for (relative to the root), the agent's overlay
        first."""
        return (agent_folder(agent_id), ".") if agent_id else (".",)

    def _open_first(
        self, root: Beneath, folders: tuple[str, ...], name: str
    ) -> tuple[int, int, os.stat_result] | None:
        """The first regular file ``name`` of ``folders``: its folder's index, an open
        descriptor, its ``fstat``. Opened beneath the root like the file tools' paths, so a
        link (an agent may make one in its own folder) leads nowhere outside the workspace:
        such a file is left out, said once in the log."""
        for index, folder in enumerate(folders):
            relative = f"{folder}/{name}"
            try:
                fd = root.open_file(relative, os.O_RDONLY)
            except OSError as exc:
                if exc.errno == errno.EXDEV and relative not in self._refused:
                    self._refused.add(relative)
                    log.warning(
                        "bootstrap file %s left out: it leads outside the workspace (through a "
                        "link); copy the file into the workspace instead",
                        relative,
                    )
                continue
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                return index, fd, info
            os.close(fd)  # a folder, a pipe: nothing to read
        return None

    def _read_cached(self, relative: str, mtime: int, fd: int) -> str:
        cached = self._cache.get(relative)
        if cached and cached[0] == mtime:
            return cached[1]
        data = b""
        try:
            os.set_blocking(fd, True)
            while len(data) < MAX_BOOTSTRAP_BYTES and (chunk := os.read(fd, MAX_BOOTSTRAP_BYTES)):
                data += chunk
        except OSError:  # unreadable (a disk error): left out, looked at again next time
            return ""
        text = data.decode("utf-8", errors="replace")[:MAX_BOOTSTRAP_CHARS]
        self._cache[relative] = (mtime, text)
        return text
