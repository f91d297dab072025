"""Skills: knowledge in ``workspace/skills/<name>/SKILL.md``, never code.

A skill's front matter gives its ``name``, ``description`` and optional ``requires.tools``.
Only the active agent's allowed skills are listed in its system prompt (name and
description); the body is read on demand with the ``skill_read`` tool
(``clawbot.tools.skills``). Skills are discovered once and re-read only when a SKILL.md file
changes, each opened beneath the workspace's root (``clawbot.agents.beneath``): no link
leads a skill out of the workspace.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from clawbot.agents.beneath import Beneath
from clawbot.agents.profiles import AgentSpec
from clawbot.agents.workspace import RECHECK_SECONDS
from clawbot.clock import Clock, SystemClock
from clawbot.errors import ClawbotError

log = logging.getLogger("clawbot.skills")

SKILL_FILE = "SKILL.md"
SKILL_READ = "skill_read"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    path: Path
    requires_tools: tuple[str, ...] = ()


class SkillError(ClawbotError):
    """A SKILL.md file whose front matter cannot be used. The message names the line to fix;
    the library leaves the skill out and lists the problem."""


def parse_skill(text: str, path: Path) -> Skill:
    """Read a SKILL.md: ``---`` front matter (``key: value`` lines, ``requires:`` with a
    nested ``tools:`` list, in block or ``[a, b]`` form) followed by the body."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillError("it must start with a '---' front matter block")
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    except StopIteration:
        raise SkillError("the front matter block is not closed with '---'") from None
    fields = _front_matter(lines[1:end])
    name = fields.get("name") or path.parent.name
    description = fields.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str) or not description:
        raise SkillError("the front matter needs a 'description: ...' line")
    tools = fields.get("requires.tools", [])
    return Skill(
        name=name,
        description=description,
        body="\n".join(lines[end + 1 :]).strip(),
        path=path,
        requires_tools=tuple(tools) if isinstance(tools, list) else (str(tools),),
    )


def _front_matter(lines: list[str]) -> dict[str, str | list[str]]:
    """Flatten a small YAML subset to dotted keys: ``requires.tools -> [..]``."""
    fields: dict[str, str | list[str]] = {}
    parents: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, start=2):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip())
        line = raw.strip()
        # A list item may sit at its key's own indent, as YAML allows.
        item = line.startswith("- ")
        while parents and (parents[-1][0] > indent or (parents[-1][0] == indent and not item)):
            parents.pop()
        prefix = ".".join(key for _, key in parents)
        if item:
            if not prefix:
                raise SkillError(f"line {number}: a list item outside a key")
            items = fields.setdefault(prefix, [])
            if not isinstance(items, list):
                raise SkillError(f"line {number}: {prefix} mixes a value and a list")
            items.append(_scalar(line[2:]))
            continue
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            raise SkillError(f"line {number}: expected 'key: value'")
        full = f"{prefix}.{key.strip()}" if prefix else key.strip()
        value = value.strip()
        if not value:
            parents.append((indent, key.strip()))
        elif value.startswith("[") and value.endswith("]"):
            fields[full] = [_scalar(item) for item in value[1:-1].split(",") if item.strip()]
        else:
            fields[full] = _scalar(value)
    return fields


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


_Found = tuple[str, int, os.stat_result]
"""A SKILL.md opened: its path in the workspace (``skills/<name>/SKILL.md``), an open
descriptor, its ``fstat``."""


class SkillLibrary:
    """The skills of one workspace, cached until a SKILL.md is added, removed or edited
    (looked for at most once per ``RECHECK_SECONDS``, and at once after :meth:`changed`).

    ``root`` is the skills folder of a workspace (its parent). Each SKILL.md is opened
    beneath the workspace's root, as the file tools open paths: a link to a skill elsewhere
    in the workspace is followed, one that leads outside it is left out (said once in the
    log: an agent's shell may make links), and so is anything but a regular file (a named
    pipe is never waited on). What is read comes from the descriptor whose ``fstat`` gave
    the fingerprint."""

    def __init__(self, root: Path, *, clock: Clock | None = None) -> None:
        self.root = root
        self.clock: Clock = clock or SystemClock()
        self._checked: float | None = None
        self._fingerprint: tuple[tuple[str, int, int], ...] | None = None
        self._skills: tuple[Skill, ...] = ()
        self._refused: set[str] = set()
        self.problems: tuple[str, ...] = ()
        self.generation = 0
        """Counts reloads, so callers can memoize on the current set of skills."""

    def all(self) -> tuple[Skill, ...]:
        now = self.clock.monotonic()
        if self._checked is not None and now - self._checked < RECHECK_SECONDS:
            return self._skills
        self._checked = now
        found = self._open_all()
        try:
            fingerprint = tuple((where, info.st_mtime_ns, info.st_size) for where, _, info in found)
            if fingerprint != self._fingerprint:
                self._load(fingerprint, found)
        finally:
            for _, fd, _ in found:
                os.close(fd)
        return self._skills

    def changed(self) -> None:
        """Files may have been written from inside (a tool round): look at the next call."""
        self._checked = None

    def for_agent(self, agent: AgentSpec, tool_names: Collection[str]) -> tuple[Skill, ...]:
        """The skills ``agent`` may use: allowed by its skill policy, with every required
        tool available to it, and only when it can read them (``skill_read``)."""
        if SKILL_READ not in tool_names:
            return ()
        return tuple(
            skill
            for skill in self.all()
            if agent.allows_skill(skill.name)
            and all(tool in tool_names for tool in skill.requires_tools)
        )

    def _open_all(self) -> list[_Found]:
        """Each skill folder's SKILL.md that is a regular file, opened beneath the
        workspace's root, in name order (none when the folder cannot be opened)."""
        found: list[_Found] = []
        try:
            with Beneath.open(self.root.parent.resolve()) as workspace:
                folder = workspace.open_folder(self.root.name)
                try:
                    names = sorted(os.listdir(folder))
                finally:
                    os.close(folder)
                for name in names:
                    opened = self._open(workspace, f"{self.root.name}/{name}/{SKILL_FILE}")
                    if opened is not None:
                        found.append(opened)
        except OSError:  # no skills folder (or it leads out)
            for _, fd, _ in found:
                os.close(fd)
            return []
        return found

    def _open(self, workspace: Beneath, where: str) -> _Found | None:
        try:
            fd = workspace.open_file(where, os.O_RDONLY)
        except OSError as exc:
            if exc.errno == errno.EXDEV and where not in self._refused:
                self._refused.add(where)
                log.warning(
                    "skill %s left out: it leads outside the workspace (through a link); copy "
                    "the skill into the workspace instead",
                    where,
                )
            return None
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            return where, fd, info
        os.close(fd)  # a folder, a pipe: nothing to read
        return None

    def _load(self, fingerprint: tuple[tuple[str, int, int], ...], found: list[_Found]) -> None:
        skills: dict[str, Skill] = {}
        problems = []
        for where, fd, _ in found:
            path = self.root.parent / where
            try:
                skill = parse_skill(_read(fd).decode("utf-8"), path)
            except (OSError, UnicodeDecodeError, SkillError) as exc:
                problems.append(f"{where}: {exc}")
                continue
            if skill.name in skills:
                problems.append(f"{where}: another skill is already named {skill.name!r}")
                continue
            skills[skill.name] = skill
        for problem in problems:
            log.warning("skill skipped: %s", problem)
        self._skills = tuple(sorted(skills.values(), key=lambda s: s.name))
        self.problems = tuple(problems)
        self._fingerprint = fingerprint
        self.generation += 1


def _read(fd: int) -> bytes:
    """All of an open regular file, from its start."""
    os.set_blocking(fd, True)
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 64 * 1024):
        chunks.append(chunk)
    return b"".join(chunks)


def skills_prompt(skills: Collection[Skill]) -> str:
    lines = [
        "## Skills",
        f"Skills are instructions for particular tasks. When a task matches one, call "
        f"{SKILL_READ} with its name first and follow it.",
    ]
    lines += [f"- {skill.name}: {skill.description}" for skill in skills]
    return "\n".join(lines)
