"""Workspace reach: the folders of the workspace a session's file tools may read, and the
ones they may also write.

The workspace confines every file tool (``Workspace.resolve``); a reach narrows that per
session. A session's reach is its own agent's within its parent's, and its parent's within
the grandparent's (``clawbot.subagents.ceiling.session_reach``), looked up again on every
file tool call: a parent that loses a permission narrows its running child at once, and a
read-only agent's child writes nothing, whatever its own agent allows.

Today an agent's own reach is the whole workspace, read-only unless it holds a tool that
writes files; a coordinator's also holds its scratchpad folder. Risk profiles and sibling
folders (issue 18) narrow it to folders: more roots, the same intersection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass

from clawbot.errors import ToolError

WHOLE = "."
"""The root that stands for the whole workspace."""
READING_TOOLS = frozenset({"file_read", "list_dir"})
WRITING_TOOLS = frozenset({"file_write", "file_edit", "shell_exec"})
"""Tools that write the workspace: a shell writes wherever its sandbox lets it."""
REFUSAL_HINT = "a subagent reaches no further than the session that started it: report back"


@dataclass(frozen=True)
class Root:
    """One folder of the workspace (a path relative to it, ``.`` for all of it), and
    whether it may be written."""

    path: str
    write: bool

    def holds(self, relative: str) -> bool:
        """Whether the workspace path ``relative`` (resolved, ``/``-separated) is in it."""
        return self.path == WHOLE or relative == self.path or relative.startswith(self.path + "/")

    def label(self) -> str:
        where = "the whole workspace" if self.path == WHOLE else self.path
        return f"{where} ({'read and write' if self.write else 'read only'})"


@dataclass(frozen=True)
class Reach:
    """The roots a session's file tools may use; none: no file at all."""

    roots: tuple[Root, ...] = ()

    @classmethod
    def whole(cls, *, write: bool = True) -> Reach:
        return cls((Root(WHOLE, write),))

    @classmethod
    def of_tools(cls, tool_names: Collection[str]) -> Reach:
        """An agent's own reach from the tools it holds: the whole workspace, written only
        with a tool that writes files, nothing without a file tool."""
        if not WRITING_TOOLS.isdisjoint(tool_names):
            return cls.whole(write=True)
        if not READING_TOOLS.isdisjoint(tool_names):
            return cls.whole(write=False)
        return cls()

    def within(self, ceiling: Reach) -> Reach:
        """What both reach: each folder of one inside a folder of the other, written only
        where both may write."""
        found: list[Root] = []
        for mine in self.roots:
            for theirs in ceiling.roots:
                if theirs.holds(mine.path):
                    found.append(Root(mine.path, mine.write and theirs.write))
                elif mine.holds(theirs.path):
                    found.append(Root(theirs.path, mine.write and theirs.write))
        return Reach(_distinct(found))

    def plus(self, root: Root) -> Reach:
        return Reach(_distinct((*self.roots, root)))

    def allows(self, relative: str, *, write: bool) -> bool:
        return any(root.holds(relative) and (root.write or not write) for root in self.roots)

    def check(self, relative: str, shown: str, *, write: bool) -> None:
        """Raise a ToolError naming what this reach allows unless it allows ``relative``."""
        if self.allows(relative, write=write):
            return
        if write and self.allows(relative, write=False):
            raise ToolError(
                f"{shown} may not be changed: this session may only read it "
                f"(its reach: {self.describe()})",
                hint=REFUSAL_HINT,
            )
        raise ToolError(
            f"{shown} is outside this session's reach (its reach: {self.describe()})",
            hint=REFUSAL_HINT,
        )

    def describe(self) -> str:
        return ", ".join(root.label() for root in self.roots) or "no file at all"


def _distinct(roots: Iterable[Root]) -> tuple[Root, ...]:
    """The roots without repeats, a writable one winning over the same folder read-only."""
    best: dict[str, bool] = {}
    for root in roots:
        best[root.path] = best.get(root.path, False) or root.write
    return tuple(Root(path, write) for path, write in sorted(best.items()))


ReachSource = Callable[[], Awaitable[Reach]]
"""How a tool learns its session's reach at the moment of the call."""


async def whole_workspace() -> Reach:
    """The reach of a tool context built outside a turn: the workspace confines it alone."""
    return Reach.whole()
