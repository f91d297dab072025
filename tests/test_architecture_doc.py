"""docs/architecture.md is the newcomer's map of the modules: it names every module that
exists, and none that does not."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "architecture.md"
PACKAGES = ("clawbot", "adapters")
TOKEN = re.compile(r"`([\w./]+(?:\.py|/))`")


def modules() -> set[str]:
    """Every module file of the packages, as a path from the repository root."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name not in {"__init__.py", "__main__.py"}:
                found.add(path.relative_to(ROOT).as_posix())
    return found


def rooted(token: str) -> str | None:
    """A path as the map writes it (``store/jobs.py`` is in ``clawbot/``) from the root;
    None for a path outside the packages (``tests/...``)."""
    first = token.split("/")[0]
    if first in PACKAGES:
        return token
    return f"clawbot/{token}" if (ROOT / "clawbot" / first).is_dir() else None


def named_in(text: str) -> set[str]:
    """The module paths a map names, as paths from the repository root.

    In a table row, a path with a folder sets the folder of the bare names after it in the
    first cell (`clawbot/runtime.py`, `llm.py`); a folder alone (`clawbot/subagents/`) also
    holds the bare names in the rest of its row. Elsewhere a name needs its folder.
    """
    named: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("|"):  # prose: only paths with their folder
            named.update(p for t in TOKEN.findall(line) if t.endswith(".py") and (p := rooted(t)))
            continue
        first, *rest = line.strip().strip("|").split("|")
        folder: str | None = None
        folders: list[str] = []
        for token in TOKEN.findall(first):
            path = rooted(token) if "/" in token else None
            if token.endswith("/"):
                folder = path.rstrip("/") if path else None
                folders += [folder] if folder else []
            elif path is not None:
                named.add(path)
                folder = path.rsplit("/", 1)[0]
            elif "/" not in token and folder is not None:
                named.add(f"{folder}/{token}")
        for token in (t for cell in rest for t in TOKEN.findall(cell) if t.endswith(".py")):
            path = rooted(token) if "/" in token else None
            if path is not None:
                named.add(path)
            elif "/" not in token:
                named.update(f"{held}/{token}" for held in folders)
    return named


def test_the_map_names_every_module() -> None:
    missing = sorted(modules() - named_in(MAP.read_text()))
    assert not missing, "docs/architecture.md does not name: " + ", ".join(missing)


def test_the_map_names_no_module_that_does_not_exist() -> None:
    stale = sorted(named_in(MAP.read_text()) - modules())
    assert not stale, "docs/architecture.md names modules that do not exist: " + ", ".join(stale)


def test_a_bare_name_belongs_to_the_folder_named_before_it_in_its_row() -> None:
    text = (
        "| `clawbot/runtime.py`, `llm.py` | the turn |\n"
        "| `clawbot/subagents/` | `spawning.py` (limits) |\n"
        "| `adapters/` | `telegram.py`; see `store/jobs.py` |\n"
        "Prose naming `sessions.py` alone names nothing.\n"
    )
    assert named_in(text) == {
        "clawbot/runtime.py",
        "clawbot/llm.py",
        "clawbot/subagents/spawning.py",
        "adapters/telegram.py",
        "clawbot/store/jobs.py",
    }
