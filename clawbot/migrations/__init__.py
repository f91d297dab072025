"""Versioned schema migrations: ``NNNN_name.sql`` files applied in order at start-up.

A released migration is never edited: add a new file with the next number. ``PRAGMA
user_version`` holds the number of the last one applied. SQL stays portable where it costs
little (a PostgreSQL store is planned).
"""

from __future__ import annotations

from importlib import resources


def migrations() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every migration, in order; numbers must be 1, 2, 3, ..."""
    found = []
    for item in resources.files(__name__).iterdir():
        if item.name.endswith(".sql"):
            number, _, name = item.name.removesuffix(".sql").partition("_")
            found.append((int(number), name, item.read_text(encoding="utf-8")))
    found.sort()
    numbers = [number for number, _, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration numbers must be consecutive from 1, found {numbers}")
    return found
