"""Moving a bot from one database to another (``clawbot db copy``), SQLite to PostgreSQL or
back: every table a bot keeps, row for row with its ids, in one transaction on the target,
then the rows of each table counted on both sides. A target that holds anything is refused,
so a copy never mixes two bots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clawbot.errors import StoreError
from clawbot.store.backend import open_url
from clawbot.store.interface import Store
from clawbot.store.sql import Connection, SqlDatabase

TABLES = (
    "sessions",
    "messages",
    "turn_jobs",
    "inbound_seen",
    "backlog",
    "compactions",
    "injections",
    "pairing_requests",
    "approved_senders",
    "agent_specs",
    "memories",
    "memory_vectors",
    "audit",
    "approvals",
    "grants",
    "scheduled_tasks",
    "usage",
)
"""What a bot keeps, in an order that inserts a row after the rows it refers to."""
_CHUNK = 1000
"""Rows inserted per ``executemany``."""


@dataclass(frozen=True)
class CopyReport:
    """How many rows of each table were copied (and found again in the target)."""

    counts: tuple[tuple[str, int], ...]

    def line(self) -> str:
        return ", ".join(f"{table} {count}" for table, count in self.counts)


async def copy_database(source_url: str, target_url: str) -> CopyReport:
    """Copy every table of the bot at ``source_url`` into the empty database at
    ``target_url`` (both brought up to the latest schema first); a StoreError when the
    target holds anything or the counts differ after."""
    if source_url == target_url:
        raise StoreError("the source and the target are the same database")
    source = await open_url(source_url)
    try:
        target = await open_url(target_url)
        try:
            return await _copy(source, target)
        finally:
            await target.close()
    finally:
        await source.close()


async def _copy(source: Store, target: Store) -> CopyReport:
    source_db, target_db = _database(source), _database(target)
    held = [(table, await _count(target_db, table)) for table in TABLES]
    if any(count for _, count in held):
        what = ", ".join(f"{table} {count}" for table, count in held if count)
        raise StoreError(
            f"the target database already holds rows ({what}); a copy goes only into an"
            " empty database",
            hint="create a new database (createdb) and copy into that",
        )
    tables: list[tuple[str, list[str], list[Any]]] = []
    source_columns, target_columns = await _columns(source), set(await _columns(target))
    for table in TABLES:
        wanted = [
            column
            for owner, column in source_columns
            if owner == table and (owner, column) in target_columns
        ]
        rows = await source_db.fetchall(f"SELECT {', '.join(wanted)} FROM {table}")
        tables.append((table, wanted, rows))
    found = await source_db.fetchone("SELECT n FROM memory_vectors_version")
    version = None
    if found is not None:
        (bumps,) = found
        version = int(bumps)

    def write(db: Connection) -> None:
        for table, columns, rows in tables:
            _insert(db, table, columns, rows)
        if version is not None:
            db.execute("UPDATE memory_vectors_version SET n = ?", (version,))
        if _is_postgres(target):
            for table in ("messages", "backlog", "compactions", "memories", "audit", "grants",
                          "memory_vectors", "usage"):  # fmt: skip
                db.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                    f" (SELECT max(id) FROM {table})) WHERE EXISTS (SELECT 1 FROM {table})"
                )

    await target_db.transaction(write, background=True)
    counts = []
    for table, _, rows in tables:
        found = await _count(target_db, table)
        if found != len(rows):
            raise StoreError(
                f"the copy of {table} holds {found} rows where the source holds {len(rows)}",
                hint="report this as a bug; the target may be dropped and the copy run again",
            )
        counts.append((table, found))
    return CopyReport(tuple(counts))


def _insert(db: Connection, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
    """Insert a table's rows; sessions first without their owners (a child may come
    before its parent), which are set after."""
    if not rows:
        return
    names = list(columns)
    owner = names.index("owner_key") if table == "sessions" else -1
    values = [list(row) for row in rows]
    if owner >= 0:
        owners = [(row[owner], row[names.index("key")]) for row in values if row[owner]]
        for row in values:
            row[owner] = None
    marks = ", ".join("?" * len(names))
    sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})"
    for start in range(0, len(values), _CHUNK):
        db.executemany(sql, values[start : start + _CHUNK])
    if owner >= 0 and owners:
        db.executemany("UPDATE sessions SET owner_key = ? WHERE key = ?", owners)


def _is_postgres(store: Store) -> bool:
    return type(store).__name__ == "PostgresStore"


def _database(store: Store) -> SqlDatabase:
    database: SqlDatabase = store.database  # type: ignore[attr-defined]  # both stores have one
    return database


async def _count(database: SqlDatabase, table: str) -> int:
    (count,) = await database.fetchone(f"SELECT count(*) FROM {table}")
    return int(count)


async def _columns(store: Store) -> list[tuple[str, str]]:
    """(table, column) of every column a copy writes, in each table's order: not the
    generated ones (PostgreSQL's search vector and approvals' insertion order)."""
    if _is_postgres(store):
        sql = (
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND is_generated = 'NEVER'"
            " AND identity_generation IS DISTINCT FROM 'ALWAYS'"
            " ORDER BY table_name, ordinal_position"
        )
    else:
        sql = (
            "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p"
            " WHERE m.type = 'table' ORDER BY m.name, p.cid"
        )
    return [(str(table), str(column)) for table, column in await _database(store).fetchall(sql)]
