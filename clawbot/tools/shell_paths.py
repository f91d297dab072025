"""The shell's path checks: its working folder, and the paths written in its command.

The working folder goes through the file tools' own check (``Workspace.resolve``: no
absolute path, no ``..``, no link that leads out, no NUL, nothing too long) and the session's
reach. The command's words are checked the same way where they read as paths: a word that
climbs out of the workspace with ``..``, names a folder of the host outside the allowed roots,
starts with ``~``, or names a link inside the workspace that leads out is refused with one
clear sentence before anything runs.

These checks read the command's text, so they catch the plain cases early; they are not the
boundary. A command can build a path the text does not show (``$VAR``, ``$(...)``, a glob,
a link it makes itself). The boundary is the sandbox, which mounts nothing else; without it
the shell is ``unsafe`` and every call needs a person's confirmation.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from clawbot.agents.workspace import Workspace, shown_path
from clawbot.errors import ToolError
from clawbot.security.reach import ALWAYS_READABLE, Reach

SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/tmp")
"""Absolute paths a command may name: programs and libraries (read-only in the sandbox) and
its own fresh ``/tmp``."""
DEVICES = ALWAYS_READABLE | {"/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty"}
"""Devices any command may use; every other device file is refused."""
_HOME = re.compile(r"^~[\w.-]*(/|$)")
HINT = "use paths relative to the working folder, inside the workspace"


@dataclass(frozen=True)
class Place:
    """Where a command runs: the workspace, its working folder in it (resolved, relative),
    the session's reach, and how the workspace's root is spelled in an absolute path (its
    mount point in the sandbox, its host path outside)."""

    workspace: Workspace
    cwd: str
    reach: Reach
    root: str


def working_folder(workspace: Workspace, cwd: str, reach: Reach) -> str:
    """``cwd`` resolved in the workspace (the file tools' check) and within the reach."""
    target = workspace.resolve(cwd)
    shown = shown_path(cwd)
    if not target.is_dir():
        raise ToolError(
            f"the working folder {shown} is not a folder of the workspace"
            if target.exists()
            else f"no such working folder: {shown}",
            hint="give a folder relative to the workspace, or leave cwd out",
        )
    relative = workspace.relative(target)
    reach.check(relative, shown, write=False)
    return relative


def check_command(command: str, place: Place) -> None:
    """Refuse the command when a word of it plainly names a path outside its roots."""
    if "\0" in command:
        raise ToolError("the command contains a NUL character", hint="remove it")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError as exc:  # an unclosed quote or a trailing backslash
        raise ToolError(f"the command cannot be read: {exc}", hint="close its quotes") from None
    for word in words:
        for candidate in _candidates(word):
            _check_path(candidate, place)


def _candidates(word: str) -> Iterator[str]:
    """A word, and what follows its first ``=`` (``--file=PATH``, ``VAR=PATH``). Words with
    white space are text (a script, a message), not paths."""
    if not word or any(c.isspace() for c in word):
        return
    yield word
    _, sep, value = word.partition("=")
    if sep and value:
        yield value


def _check_path(word: str, place: Place) -> None:
    shown = shown_path(word)
    if _HOME.match(word):
        raise ToolError(f"{shown} is in a home folder, outside the workspace", hint=HINT)
    if word.startswith("/"):
        _check_absolute(word, shown, place)
        return
    joined = posixpath.normpath(posixpath.join(place.cwd, word))
    if joined == ".." or joined.startswith("../"):
        raise ToolError(f"{shown} leads outside the workspace", hint=HINT)
    if "/" in word or _exists(place.workspace, joined):
        _check_inside(joined, shown, place)


def _check_absolute(word: str, shown: str, place: Place) -> None:
    path = "/" + posixpath.normpath(word).lstrip("/")
    if path in DEVICES or path.startswith("/dev/fd/"):
        return
    if path == place.root or path.startswith(place.root.rstrip("/") + "/"):
        _check_inside(path[len(place.root) :].strip("/") or ".", shown, place)
        return
    if any(path == root or path.startswith(root + "/") for root in SYSTEM_ROOTS):
        return
    raise ToolError(
        f"{shown} is outside the folders this command may use",
        hint="use paths in the workspace; of the rest only /usr, /bin, /lib, /tmp and "
        "/dev/null (and the like) may be named",
    )


def _check_inside(relative: str, shown: str, place: Place) -> None:
    """A workspace path: no link out of it (the file tools' check), within the reach."""
    target = place.workspace.resolve(relative)
    place.reach.check(place.workspace.relative(target), shown, write=False)


def _exists(workspace: Workspace, relative: str) -> bool:
    try:
        return os.path.lexists(workspace.root / relative)
    except (OSError, ValueError):
        return False
