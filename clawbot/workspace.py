"""The workspace: the folder of bootstrap files an agent's system prompt is built from, and
the only part of the file system the file tools may touch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from clawbot.errors import WorkspaceError

BOOTSTRAP_FILES = ("IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md")
MAX_BOOTSTRAP_CHARS = 20_000


@dataclass(frozen=True)
class BootstrapFile:
    name: str
    path: Path
    text: str
    mtime: int = 0


class Workspace:
    """A folder that must exist; paths inside it are resolved and confined."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise WorkspaceError(
                f"the workspace folder {root} does not exist",
                hint="create it, or unset CLAWBOT_WORKSPACE to use the default one in CLAWBOT_HOME",
            )
        self.root = root.resolve()
        self._cache: dict[Path, tuple[int, str]] = {}
        self._candidate_cache: dict[str | None, list[tuple[str, tuple[Path, ...]]]] = {}

    def resolve(self, relative: str) -> Path:
        """The real path of ``relative`` inside the workspace, or a WorkspaceError.

        Absolute paths, ``..`` that climbs out and symlinks that lead out are all refused.
        """
        if not relative or relative.strip() == "":
            relative = "."
        candidate = Path(relative)
        if candidate.is_absolute() or relative.startswith("~"):
            raise WorkspaceError(f"absolute paths are not allowed: {relative!r}")
        if ".." in candidate.parts:
            raise WorkspaceError(f"'..' is not allowed in workspace paths: {relative!r}")
        resolved = (self.root / candidate).resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise WorkspaceError(f"{relative!r} leads outside the workspace (through a link)")
        return resolved

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path != self.root else "."

    def bootstrap(
        self, agent_id: str | None = None, *, overlay: bool = True
    ) -> list[BootstrapFile]:
        """The bootstrap files that exist, each from the agent's overlay when it has one.

        Runs every turn, so each file costs one ``stat`` and is re-read only when it changed.
        """
        found = []
        for name, candidates in self._candidates(agent_id if overlay else None):
            for path in candidates:
                try:
                    mtime = os.stat(path).st_mtime_ns
                except OSError:
                    continue
                text = self._read_cached(path, mtime)
                if text.strip():
                    found.append(BootstrapFile(name=name, path=path, text=text, mtime=mtime))
                break
        return found

    def _candidates(self, agent_id: str | None) -> list[tuple[str, tuple[Path, ...]]]:
        """Per bootstrap file, the paths to try in order (the overlay first)."""
        cached = self._candidate_cache.get(agent_id)
        if cached is None:
            cached = [
                (
                    name,
                    (self.root / "agents" / agent_id / name, self.root / name)
                    if agent_id
                    else (self.root / name,),
                )
                for name in BOOTSTRAP_FILES
            ]
            self._candidate_cache[agent_id] = cached
        return cached

    def _read_cached(self, path: Path, mtime: int) -> str:
        cached = self._cache.get(path)
        if cached and cached[0] == mtime:
            return cached[1]
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:MAX_BOOTSTRAP_CHARS]
        except IsADirectoryError:
            text = ""
        self._cache[path] = (mtime, text)
        return text
