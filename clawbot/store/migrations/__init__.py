"""Versioned schema migrations: ``NNNN_name.sql`` files applied in order at start-up.

A released migration is never edited: add a new file with a higher number. ``PRAGMA
user_version`` holds the number of the last one applied; every higher one is applied next.
PostgreSQL has its own, numbered alike (``clawbot.store.migrations_pg``): migration N
there makes the same change as migration N here, in PostgreSQL's terms.
"""

from __future__ import annotations

import sqlite3
from importlib import resources
from typing import NamedTuple

from clawbot.errors import StoreError


class Migration(NamedTuple):
    """One ``NNNN_name.sql`` file: its number, its name and its script."""

    number: int
    name: str
    script: str


def migrations(package: str = __name__) -> list[Migration]:
    """Every migration of ``package`` (this one, SQLite's; PostgreSQL's is
    ``clawbot.store.migrations_pg``), in ascending order of number."""
    found = []
    for item in resources.files(package).iterdir():
        if item.name.endswith(".sql"):
            number, _, name = item.name.removesuffix(".sql").partition("_")
            found.append(Migration(int(number), name, item.read_text(encoding="utf-8")))
    found.sort()
    numbers = [migration.number for migration in found]
    if len(set(numbers)) != len(numbers):
        raise StoreError(
            f"two migrations share a number: {numbers}",
            hint="give the newer migration file the next free number",
        )
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
        raise StoreError(
            f"a migration ends inside a statement: {current.strip()[:80]!r}",
            hint="end the migration's last statement with a semicolon",
        )
    return found


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())
