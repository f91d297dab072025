"""Bringing a database up to the latest schema: the migrations of
``clawbot.store.migrations`` it lacks, applied in order, each once even when two processes
open a new home at once, and none that would leave rows referring to missing ones."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from clawbot.errors import StoreError
from clawbot.store.migrations import migrations, statements

OnThread = Callable[[Callable[[sqlite3.Connection], bool]], Awaitable[bool]]
"""Runs a function of the connection on its thread (``Database._on_thread``)."""


async def migrate(path: Path, version: int, on_thread: OnThread) -> None:
    """Apply the migrations the database at ``path``, at schema ``version``, lacks, each in
    a transaction of its own, run by ``on_thread`` on the connection's thread."""
    known = migrations()
    latest = max((migration.number for migration in known), default=0)
    if version > latest:
        raise StoreError(
            f"the database {path} was written by a newer clawbot (schema {version})",
            hint="upgrade clawbot or point CLAWBOT_HOME at another folder",
        )
    # Foreign keys are still off here (see Database.open): a migration may rebuild a table the
    # documented way (create, copy, drop, rename), and with them on, dropping the old
    # table would cascade into the rows that refer to it. So each migration is checked
    # for dangling references before it commits.
    for number, _name, script in known:
        if number <= version:
            continue
        applied = await on_thread(functools.partial(_apply, number, script))
        if not applied:
            raise StoreError(
                f"migration {number} of {path} would leave rows that refer to"
                " missing ones, so it was not applied",
                hint="restore the database from a backup and report this as a bug",
            )


def _apply(number: int, script: str, db: sqlite3.Connection) -> bool:
    """Apply migration ``number`` unless another process already has; False when it would
    leave dangling references (then nothing of it is kept). The write lock is taken first
    and the version read again under it, so two processes opening a new home at once
    apply each migration once (the other waits for the lock, then finds it done)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        (current,) = db.execute("PRAGMA user_version").fetchone()
        if current < number:
            for statement in statements(script):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={number}")
            if db.execute("PRAGMA foreign_key_check").fetchall():
                db.execute("ROLLBACK")
                return False
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return True
