"""Workspace reach: the folders of the workspace a session's file tools and shell may read,
and the ones they may also write.

The workspace confines every file tool (``Workspace.resolve``); a reach narrows that per
session. Each agent's own reach starts from its own folder: the whole workspace for ``main``
(the operator's agent), ``agents/<agent_id>/`` for every other agent (the folder that also
holds its bootstrap overlays). Its ``siblings`` add other agents' folders, read-only or
read-write. All of it is read-only unless the agent holds a tool that writes files, and
nothing without a file tool. Sibling access lives on the agent (``AgentSpec.siblings``), not
on its risk profile: a profile is shared by many agents, a sibling names one.

A session's reach is its own agent's within its parent's, and its parent's within the
grandparent's (``clawbot.subagents.ceiling.session_reach``), looked up again on every file
tool call: a parent that loses a permission narrows its running child at once, and a
read-only agent's child writes nothing, whatever its own agent allows. So ``main`` spawning
``coder`` gives it ``agents/coder/``; ``coder`` spawning ``writer`` gives it nothing unless
``coder``'s own reach holds ``agents/writer/``. A coordinator's scratchpad folder is added
for it and its workers.

Four devices are readable by everyone, whatever the reach (``ALWAYS_READABLE``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, replace

from clawbot.agents.profiles import DEFAULT_AGENT_ID, EVERY_SIBLING, AgentSpec
from clawbot.agents.workspace import AGENT_FOLDERS, agent_folder
from clawbot.errors import ToolError

WHOLE = "."
"""The root that stands for the whole workspace."""
READING_TOOLS = frozenset({"file_read", "list_dir", "send_file"})
WRITING_TOOLS = frozenset({"file_write", "file_edit", "shell_exec"})
"""Tools that write the workspace: a shell writes wherever its sandbox lets it."""
REFUSAL_HINT = (
    "use a path in the folders of its reach; a subagent reaches no further than the session "
    "that started it: report back"
)
ALWAYS_READABLE = frozenset({"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"})
"""Absolute paths every session may read, whatever its reach (``file_read``, the shell)."""


def own_folder(agent_id: str) -> str:
    """An agent's workspace boundary: the whole workspace for ``main``, else its folder."""
    return WHOLE if agent_id == DEFAULT_AGENT_ID else agent_folder(agent_id)


def sibling_folder(agent_id: str) -> str:
    """The folder a sibling grant names: ``agents/<id>``, or ``agents`` for ``*``. (For
    ``main`` that is ``agents/main``, its overlays: never the whole workspace.)"""
    return AGENT_FOLDERS if agent_id == EVERY_SIBLING else agent_folder(agent_id)


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
    """The roots a session's file tools may use (none: no file at all), and its own folder
    (``home``: where its shell runs unless told otherwise), None when out of reach."""

    roots: tuple[Root, ...] = ()
    home: str | None = None

    @classmethod
    def whole(cls, *, write: bool = True) -> Reach:
        return cls((Root(WHOLE, write),), home=WHOLE)

    @classmethod
    def of_agent(cls, agent: AgentSpec, tool_names: Collection[str]) -> Reach:
        """An agent's own reach from the tools it holds: its own folder and the sibling
        folders its spec grants (``siblings``), written only with a tool that writes files
        (a sibling only when granted ``write``), nothing without a file tool."""
        if not WRITING_TOOLS.isdisjoint(tool_names):
            write = True
        elif not READING_TOOLS.isdisjoint(tool_names):
            write = False
        else:
            return cls()
        home = own_folder(agent.agent_id)
        siblings = (
            Root(sibling_folder(other), write and access == "write")
            for other, access in agent.siblings.items()
        )
        return cls(_distinct((Root(home, write), *siblings)), home=home)

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
        within = Reach(_distinct(found))
        if self.home is not None and within.allows(self.home, write=False):
            return replace(within, home=self.home)
        return within

    @property
    def folder_to_make(self) -> str | None:
        """The session's own folder when it is an agent's (made at its first call, so its
        shell can run there and a look inside finds it empty); None for the whole
        workspace, which exists, or no folder of its own."""
        return None if self.home == WHOLE else self.home

    def plus(self, root: Root) -> Reach:
        return Reach(_distinct((*self.roots, root)), home=self.home)

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


def siblings_beyond(actor: AgentSpec, new: AgentSpec, old: AgentSpec | None) -> list[str]:
    """The sibling grants ``new`` would gain (over ``old``) on folders ``actor`` itself does
    not reach so: an agent cannot hand out a folder it may not use (``agent_create``,
    ``agent_update``). The actor's folders as its agent spec sets them, its tools aside."""
    mine = Reach.of_agent(actor, WRITING_TOOLS)
    before = old.siblings if old is not None else {}
    return [
        f"{other} ({access})"
        for other, access in new.siblings.items()
        if before.get(other) not in (access, "write")
        and not mine.allows(sibling_folder(other), write=access == "write")
    ]


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
