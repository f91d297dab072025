"""Where a database's schema stands, and bringing it up to date, for ``clawbot db status``
and ``clawbot db migrate`` on either backend (a serving process migrates at its first start
anyway)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from clawbot.errors import StoreError
from clawbot.store.backend import POSTGRES_SCHEMES, open_url, sqlite_path
from clawbot.store.migrations import migrations


@dataclass(frozen=True)
class SchemaStatus:
    """A database's backend, where it is (no password), its schema and the latest one."""

    backend: str
    where: str
    version: int
    latest: int

    @property
    def pending(self) -> int:
        return max(self.latest - self.version, 0)

    def line(self) -> str:
        state = "up to date" if not self.pending else f"{self.pending} migration(s) to apply"
        if self.version > self.latest:
            state = "written by a newer clawbot"
        return f"{self.backend} {self.where}: schema {self.version} of {self.latest}, {state}"


async def schema_status(url: str) -> SchemaStatus:
    """The schema of the database ``url`` names, read without changing anything."""
    if urlsplit(url).scheme in POSTGRES_SCHEMES:
        from clawbot.store.postgres.database import PostgresDatabase
        from clawbot.store.postgres.migrate import latest, schema_version

        database = await PostgresDatabase.open(url)
        try:
            version = await database.run(schema_version)
        finally:
            await database.close()
        return SchemaStatus("postgresql", database.where, version, latest())
    path = sqlite_path(url)
    if path is None:
        raise StoreError("a database URL must start with postgresql:// or sqlite:///")
    newest = max(migration.number for migration in migrations())
    return SchemaStatus("sqlite", str(path), _sqlite_version(path), newest)


def _sqlite_version(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read the database {path}: {exc}") from None
    return int(version)


async def migrate_url(url: str) -> tuple[SchemaStatus, SchemaStatus]:
    """Apply the migrations the database lacks (creating it if needed); its status before
    and after."""
    before = await schema_status(url)
    store = await open_url(url)
    await store.close()
    return before, await schema_status(url)
