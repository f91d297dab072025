"""The home folder (``~/.clawbot`` or CLAWBOT_HOME): the database and the user's own copy of
the workspace and agent definitions, seeded from the shipped defaults on first run.

Seeding copies only files that are missing, once; the user's edits are never overwritten.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from clawbot.errors import ConfigError
from clawbot.settings import Settings

SHIPPED_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_WORKSPACE = SHIPPED_ROOT / "workspace"
SHIPPED_AGENTS = SHIPPED_ROOT / "agents"
SEEDED_MARKER = ".seeded"


def _copy_missing(source: Path, target: Path) -> list[Path]:
    copied: list[Path] = []
    if not source.is_dir():
        return copied
    for path in sorted(source.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts:
            continue
        destination = target / path.relative_to(source)
        if destination.exists():
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
        copied.append(destination)
    return copied


def prepare_home(settings: Settings) -> list[Path]:
    """Create the home folder and seed it on first run; return the files that were copied.

    A workspace set explicitly with CLAWBOT_WORKSPACE is the user's: it must exist and is
    never seeded. The default workspace, once deleted, comes back as shipped (the user never
    chose its place, so there is nothing for them to fix); single files deleted from it stay
    deleted.
    """
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the home folder {home}: {exc.strerror}",
            hint="set CLAWBOT_HOME to a writable folder",
        ) from None
    marker = home / SEEDED_MARKER
    first_run = not marker.exists()
    default_missing = settings.workspace is None and not settings.workspace_dir.is_dir()
    if not first_run and not default_missing:
        return []
    if not (SHIPPED_WORKSPACE.is_dir() and SHIPPED_AGENTS.is_dir()):
        # A copy installed without its source tree (a plain `pip install` of a wheel) would
        # seed an empty home: agents without a prompt, no skills. Say so instead.
        raise ConfigError(
            f"this clawbot has no shipped workspace and agents to seed {home} with"
            f" (looked in {SHIPPED_ROOT})",
            hint="install clawbot from a clone with `pip install -e .`, as the README says",
        )
    copied: list[Path] = []
    try:
        if settings.workspace is None:
            copied += _copy_missing(SHIPPED_WORKSPACE, settings.workspace_dir)
            settings.workspace_dir.mkdir(parents=True, exist_ok=True)
        if first_run:
            copied += _copy_missing(SHIPPED_AGENTS, settings.agents_dir)
            marker.write_text("The shipped workspace and agents were copied here once.\n")
    except OSError as exc:
        raise ConfigError(
            f"cannot seed the home folder {home}: {exc}",
            hint="set CLAWBOT_HOME to a writable folder",
        ) from None
    return copied
