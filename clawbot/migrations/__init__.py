"""Versioned schema migrations: ``NNNN_name.sql`` files applied in order at start-up.

A released migration is never edited: add a new file with a higher number. ``PRAGMA
user_version`` holds the number of the last one applied; every higher one is applied next.
SQL stays portable where it costs little (a PostgreSQL store is planned).
"""

from __future__ import annotations

import sqlite3
from importlib import resources


def migrations() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every migration, in ascending order of number."""
    found = []
    for item in resources.files(__name__).iterdir():
        if item.name.endswith(".sql"):
            number, _, name = item.name.removesuffix(".sql").partition("_")
            found.append((int(number), name, item.read_text(encoding="utf-8")))
    found.sort()
    numbers = [number for number, _, _ in found]
    if len(set(numbers)) != len(numbers):
        raise RuntimeError(f"two migrations share a number: {numbers}")
    return found


def statements(script: str) -> list[str]:
    """The statements of a migration script, one by one, so they can run inside a
    transaction the caller holds (``executescript`` would commit it first). SQLite's own
    ``complete_statement`` decides where one ends, so a trigger body stays whole."""
    found: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip().strip(";").strip():
                found.append(current.strip())
            current = ""
    if current.strip() and not _only_comments(current):
        raise RuntimeError(f"a migration ends inside a statement: {current.strip()[:80]!r}")
    return found


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())
