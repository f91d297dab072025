"""The repositories' SQL (SQLite's dialect, ``?`` placeholders) as PostgreSQL runs it. Each
statement is rewritten once and the result kept, so the cost is a dictionary lookup.

What differs, and only this:
- placeholders: ``?`` becomes ``%s`` and a literal ``%`` doubles (psycopg's format);
- ``INSERT OR IGNORE`` becomes ``INSERT ... ON CONFLICT DO NOTHING``;
- ``x IS ?`` (SQLite's null-safe equality) becomes ``x IS NOT DISTINCT FROM %s``;
- an ``INSERT`` into a table whose key is a generated ``id`` returns it (``RETURNING id``),
  which is how the connection gives the id SQLite's ``lastrowid`` gives.
Anything else the repositories write is already both dialects (``ON CONFLICT ... DO UPDATE``,
row values, ``RETURNING``, ``CASE``)."""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

ID_TABLES = frozenset(
    {"messages", "backlog", "memories", "audit", "compactions", "grants", "memory_vectors"}
)
"""Tables keyed by a generated integer ``id`` (SQLite's INTEGER PRIMARY KEY)."""

_INSERT_INTO = re.compile(r"^\s*INSERT\s+(?:OR\s+IGNORE\s+)?INTO\s+(\w+)", re.IGNORECASE)
_OR_IGNORE = re.compile(r"^(\s*INSERT)\s+OR\s+IGNORE\b", re.IGNORECASE)
_IS_PARAMETER = re.compile(r"\bIS\s+\?", re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


class Statement(NamedTuple):
    """A statement as PostgreSQL runs it, and whether it returns the id it inserted."""

    sql: str
    returns_id: bool


@functools.lru_cache(maxsize=4096)
def postgres(sql: str, *, many: bool = False) -> Statement:
    """``sql`` in PostgreSQL's dialect (``many``: for ``executemany``, whose inserted ids
    nobody reads)."""
    insert = _INSERT_INTO.match(sql)
    ignore = _OR_IGNORE.match(sql) is not None
    text = _OR_IGNORE.sub(r"\1", sql) if ignore else sql
    text = _IS_PARAMETER.sub("IS NOT DISTINCT FROM ?", text)
    text = _placeholders(text)
    if ignore:
        text += " ON CONFLICT DO NOTHING"
    returns_id = (
        not many
        and insert is not None
        and insert.group(1).lower() in ID_TABLES
        and _RETURNING.search(text) is None
    )
    if returns_id:
        text += " RETURNING id"
    return Statement(text, returns_id)


def _placeholders(sql: str) -> str:
    """``?`` outside quotes as ``%s``, every ``%`` doubled (psycopg reads ``%`` everywhere,
    quoted or not)."""
    out: list[str] = []
    quote = ""
    for char in sql:
        if char == "%":
            out.append("%%")
            continue
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "?":
            out.append("%s")
            continue
        out.append(char)
    return "".join(out)
