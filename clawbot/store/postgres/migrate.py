"""Bringing a PostgreSQL database up to the latest schema: the migrations of
``clawbot.store.migrations_pg`` it lacks, in order, each in a transaction of its own (DDL is
transactional here) under an advisory lock, so several processes starting at once apply
each one once. Then pgvector, when the server has it (``clawbot.store.postgres.vectors``):
not a numbered migration, since it depends on the server, which may gain it later."""

from __future__ import annotations

from typing import Any

import psycopg

from clawbot.errors import StoreError
from clawbot.store.migrations import Migration, migrations
from clawbot.store.postgres import vectors

PACKAGE = "clawbot.store.migrations_pg"
LOCK = 0x636C6177  # "claw": the advisory lock every migrating process takes
_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS clawbot_schema (version INTEGER NOT NULL)"


def known() -> list[Migration]:
    return migrations(PACKAGE)


def latest() -> int:
    return max((migration.number for migration in known()), default=0)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The number of the last migration applied; 0 for a database clawbot never wrote."""
    found = conn.execute("SELECT to_regclass('clawbot_schema') IS NOT NULL").fetchone()
    if found is None or not found[0]:
        return 0
    row = conn.execute("SELECT max(version) FROM clawbot_schema").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def migrate(conn: psycopg.Connection[Any], where: str) -> list[int]:
    """Apply the migrations the database lacks; the numbers applied. Refuses a database a
    newer clawbot wrote."""
    version = schema_version(conn)
    if version > latest():
        raise StoreError(
            f"the PostgreSQL database {where} was written by a newer clawbot (schema {version})",
            hint="upgrade clawbot or point CLAWBOT_DATABASE_URL at another database",
        )
    applied = []
    for number, _name, script in known():
        if number <= version:
            continue
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK,))
            conn.execute(_VERSION_TABLE)
            if schema_version(conn) >= number:
                continue  # another process applied it meanwhile
            if _statements(script):
                conn.execute(script)  # several statements, no parameters: the simple protocol
            conn.execute("DELETE FROM clawbot_schema")
            conn.execute("INSERT INTO clawbot_schema (version) VALUES (%s)", (number,))
        applied.append(number)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK,))
        vectors.enable(conn, where)
    return applied


def _statements(script: str) -> bool:
    """Whether a script holds anything but comments (an empty query is an error)."""
    return any(line.strip() and not line.strip().startswith("--") for line in script.splitlines())
