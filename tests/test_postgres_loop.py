"""Single statements, and transactions written as one statement, are sent from the event
loop itself (clawbot/store/postgres/loop.py): no hop to the connection's worker thread,
the same results and errors, the same order among all of a database's operations."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import psycopg
import pytest

from clawbot.errors import StoreError
from clawbot.store.postgres.database import PostgresDatabase
from clawbot.store.sql import Connection
from tests.postgres_server import PostgresServer
from tests.test_postgres_batching import queries_sent

TABLE = "CREATE TABLE messages (id BIGSERIAL PRIMARY KEY, body TEXT UNIQUE, n BIGINT)"
REFUSED_MIDWAY = (
    "WITH first AS (INSERT INTO messages (body) VALUES ('new'))"
    " INSERT INTO messages (body) VALUES (?)"
)
"""Refused for a body already taken, after it wrote a row of its own ('new')."""


@pytest.fixture
async def url(postgres_server: PostgresServer) -> str:
    return postgres_server.new_database()


@pytest.fixture
async def database(url: str) -> AsyncIterator[PostgresDatabase]:
    db = await PostgresDatabase.open(url)
    await db.write(TABLE, ())
    yield db
    await db.close()


def worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("clawbot-postgres")]


async def bodies(db: PostgresDatabase) -> list[str]:
    return [row[0] for row in await db.fetchall("SELECT body FROM messages ORDER BY id")]


def usage_row(db: Connection) -> None:
    db.execute("INSERT INTO messages (body) VALUES ('usage')")


def taken_row(db: Connection) -> None:
    db.execute("INSERT INTO messages (body) VALUES ('taken')")


async def test_reads_writes_and_one_statement_transactions_never_wake_the_worker_thread(
    database: PostgresDatabase,
) -> None:
    assert await database.write("INSERT INTO messages (body, n) VALUES (?, ?)", ("one", 1)) == 1
    rows = await database.commit_statement(
        "INSERT INTO messages (body, n) VALUES (?, ?) RETURNING n", ("two", 2)
    )

    assert rows == [(2,)]
    assert await database.fetchone("SELECT n FROM messages WHERE body = ?", ("one",)) == (1,)
    assert await bodies(database) == ["one", "two"]
    assert worker_threads() == []  # the thread is made at its first use: there was none


async def test_a_statement_the_server_refuses_is_a_store_error_and_the_connection_goes_on(
    database: PostgresDatabase,
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))

    with pytest.raises(StoreError, match="refused: duplicate key"):
        await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))

    assert await bodies(database) == ["taken"]


async def test_a_one_statement_transaction_the_server_refuses_writes_nothing(
    database: PostgresDatabase,
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))
    database.soon(usage_row)

    with pytest.raises(StoreError, match="refused: duplicate key"):
        await database.commit_statement(REFUSED_MIDWAY, ("taken",))
    assert await bodies(database) == ["taken"]
    await database.commit_statement("INSERT INTO messages (body) VALUES (?)", ("next",))

    assert await bodies(database) == ["taken", "next", "usage"]  # the waiting row went next


async def test_a_waiting_row_that_fails_is_dropped_and_the_statement_commits(
    database: PostgresDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))
    database.soon(taken_row)

    await database.commit_statement("INSERT INTO messages (body) VALUES (?)", ("reply",))

    assert await bodies(database) == ["taken", "reply"]
    assert "1 rows no caller waited for could not be written" in caplog.text


async def test_operations_keep_their_order_between_the_loop_and_the_thread(
    database: PostgresDatabase,
) -> None:
    def unit(db: Connection) -> None:
        db.execute("INSERT INTO messages (body) VALUES (?)", ("on the thread",))

    written = asyncio.ensure_future(database.transaction(unit))  # asked first
    read = asyncio.ensure_future(database.fetchall("SELECT body FROM messages"))

    await written
    assert await read == [("on the thread",)]


async def test_a_lost_connection_is_a_store_error_and_the_next_operation_connects_again(
    database: PostgresDatabase, url: str
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("kept",))
    pid = database._conn.pgconn.backend_pid  # the one connection
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    with pytest.raises(StoreError, match="lost the PostgreSQL database"):
        await database.fetchall("SELECT body FROM messages")

    assert await bodies(database) == ["kept"]


async def test_a_waiting_row_rides_on_a_one_statement_transaction_in_its_round_trip(
    database: PostgresDatabase,
) -> None:
    database.soon(usage_row)

    with queries_sent(database) as sent:
        await database.commit_statement("INSERT INTO messages (body) VALUES (?)", ("reply",))

    assert sent == ["(extended)"]  # BEGIN, the statement, the row's savepoint, COMMIT
    assert await bodies(database) == ["reply", "usage"]


async def test_a_lone_statement_the_server_refuses_writes_nothing_of_it(
    database: PostgresDatabase,
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))

    with pytest.raises(StoreError, match="refused: duplicate key"):
        await database.commit_statement(REFUSED_MIDWAY, ("taken",))

    assert await bodies(database) == ["taken"]
    assert await database.commit_statement("SELECT count(*) FROM messages", ()) == [(1,)]


async def running_on_the_server(url: str, fragment: str) -> None:
    """Until a statement containing ``fragment`` runs on the server (seen from another
    connection), polled: the server is another process."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as watcher:
        async with asyncio.timeout(10):
            while True:
                cursor = await watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
                    (f"%{fragment}%",),
                )
                row = await cursor.fetchone()
                if row is not None and row[0]:
                    return
                await asyncio.sleep(0.01)


async def test_a_read_its_caller_stopped_waiting_for_leaves_the_connection_to_the_next(
    database: PostgresDatabase, url: str
) -> None:
    slow = asyncio.ensure_future(database.fetchall("SELECT 41 FROM pg_sleep(0.3)"))
    await running_on_the_server(url, "pg_sleep(0.3)")
    slow.cancel()

    after = await database.fetchone("SELECT 42")

    assert slow.cancelled()
    assert after == (42,)


async def test_a_transaction_its_caller_stopped_waiting_for_commits_whole_and_in_order(
    database: PostgresDatabase, url: str
) -> None:
    sql = "INSERT INTO messages (body) SELECT ? FROM pg_sleep(0.3) RETURNING body"
    slow = asyncio.ensure_future(database.commit_statement(sql, ("first",)))
    await running_on_the_server(url, "pg_sleep(0.3)")
    slow.cancel()

    await database.write("INSERT INTO messages (body) VALUES (?)", ("second",))

    assert await bodies(database) == ["first", "second"]


async def test_a_unit_of_work_its_caller_stopped_waiting_for_keeps_the_next_out_until_done(
    database: PostgresDatabase, url: str
) -> None:
    def slow_work(db: Connection) -> None:
        db.execute("INSERT INTO messages (body) VALUES ('first')")
        db.execute("SELECT pg_sleep(0.3)").fetchall()  # a read midway: sent and waited for

    slow = asyncio.ensure_future(database.transaction(slow_work))
    await running_on_the_server(url, "pg_sleep(0.3)")
    slow.cancel()

    await database.write("INSERT INTO messages (body) VALUES (?)", ("second",))

    assert await bodies(database) == ["first", "second"]


async def test_statements_prepared_beyond_the_limit_are_freed_on_the_server(
    database: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clawbot.store.postgres import database as module

    monkeypatch.setattr(module, "PREPARED_AT_MOST", 3)
    for n in range(10):  # ten different statements: each prepared at its first use
        await database.commit_statement(
            f"INSERT INTO messages (body, n) VALUES (?, {n}) RETURNING n", (f"m{n}",)
        )

    (held,) = await database.fetchone("SELECT count(*) FROM pg_prepared_statements")

    assert held <= 3
    assert len(await bodies(database)) == 10


async def test_a_refused_transactions_statements_are_not_left_prepared_on_the_server(
    database: PostgresDatabase,
) -> None:
    await database.commit_statement("INSERT INTO messages (body) VALUES (?)", ("taken",))

    with pytest.raises(StoreError, match="refused: duplicate key"):
        await database.commit_statement("INSERT INTO messages (body, n) VALUES (?, 1)", ("taken",))

    held = await database.fetchall("SELECT statement FROM pg_prepared_statements")
    assert held == [("INSERT INTO messages (body) VALUES ($1) RETURNING id",)]  # the first
