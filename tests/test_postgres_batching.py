"""A unit of work on PostgreSQL is sent in as few round trips as its reads allow
(clawbot/store/postgres/batching.py): the statements before a read go with it, the rest go
with the commit. Round trips are counted as the Query messages libpq sends (its protocol
trace), the results and the rollbacks as the database holds them."""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from clawbot.errors import StoreError
from clawbot.store.postgres.database import PostgresDatabase
from clawbot.store.sql import Connection
from tests.postgres_server import PostgresServer

TABLE = "CREATE TABLE messages (id BIGSERIAL PRIMARY KEY, body TEXT UNIQUE, data BYTEA, n BIGINT)"
"""Named as a table whose inserts return their id (the dialect's ``lastrowid``)."""


ENTRY = re.compile(r"\n(?=\d{4}-\d\d-\d\d )")
"""libpq's trace: one entry per protocol message, each starting with its time."""
QUERY = re.compile(r'^\S+ \S+\tF\t\d+\tQuery\t "(.*)"$', re.DOTALL)
SYNC = re.compile(r"^\S+ \S+\tF\t\d+\tSync")


@pytest.fixture
async def database(postgres_server: PostgresServer) -> AsyncIterator[PostgresDatabase]:
    db = await PostgresDatabase.open(postgres_server.new_database())
    await db.write(TABLE, ())
    yield db
    await db.close()


@contextmanager
def libpq_trace(connection: psycopg.Connection[Any]) -> Iterator[list[str]]:
    """libpq's protocol trace of ``connection`` inside the block: its text, once the
    block ended, as the one item of the list yielded."""
    text: list[str] = []
    with tempfile.TemporaryFile("w+") as trace:
        connection.pgconn.trace(trace.fileno())
        try:
            yield text
        finally:
            connection.pgconn.untrace()
            trace.seek(0)
            text.append(trace.read())


@contextmanager
def queries_sent(db: PostgresDatabase) -> Iterator[list[str]]:
    """What each round trip inside the block sent: a Query message's SQL, or "(extended)"
    for a statement sent with its parameters apart (its Sync ends the round trip)."""
    sent: list[str] = []
    try:
        with libpq_trace(db._conn) as trace:  # the one connection: its trace
            yield sent
    finally:
        for entry in ENTRY.split("".join(trace)):
            query = QUERY.match(entry)
            if query or SYNC.match(entry):
                sent.append(query.group(1) if query else "(extended)")


async def bodies(db: PostgresDatabase) -> list[str]:
    return [row[0] for row in await db.fetchall("SELECT body FROM messages ORDER BY id")]


async def test_a_unit_that_reads_nothing_is_one_round_trip_with_its_commit(
    database: PostgresDatabase,
) -> None:
    def three_writes(db: Connection) -> None:
        db.execute("INSERT INTO messages (body) VALUES (?)", ("one",))
        db.execute("INSERT INTO messages (body) VALUES (?)", ("two",))
        db.execute("UPDATE messages SET n = ? WHERE body = ?", (2, "two"))

    with queries_sent(database) as sent:
        await database.transaction(three_writes)

    assert len(sent) == 1
    assert sent[0].startswith("BEGIN;") and sent[0].endswith("COMMIT")
    assert await bodies(database) == ["one", "two"]


async def test_a_read_sends_the_statements_before_it_and_sees_their_effect(
    database: PostgresDatabase,
) -> None:
    def insert_then_read(db: Connection) -> tuple[int | None, int, Any]:
        first = db.execute("INSERT INTO messages (body) VALUES (?)", ("one",))
        changed = db.execute("UPDATE messages SET n = 7 WHERE body = ?", ("one",))
        row = db.execute("SELECT body, n FROM messages WHERE id = ?", (first.lastrowid,)).fetchone()
        return first.lastrowid, changed.rowcount, row

    with queries_sent(database) as sent:
        new_id, changed, row = await database.transaction(insert_then_read)

    # the id is read first: BEGIN + the insert; then the update and select; then COMMIT
    assert len(sent) == 3
    assert new_id is not None and changed == 1 and row == ("one", 7)


async def test_a_failing_statement_rolls_back_the_whole_unit_with_a_store_error(
    database: PostgresDatabase,
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))

    def second_fails(db: Connection) -> None:
        sent = db.execute("INSERT INTO messages (body) VALUES (?)", ("new",))
        assert sent.lastrowid is not None  # read: sent already
        db.execute("INSERT INTO messages (body) VALUES (?)", ("taken",))  # with the commit

    with pytest.raises(StoreError, match="refused"):
        await database.transaction(second_fails)

    assert await bodies(database) == ["taken"]
    await database.transaction(lambda db: db.execute("INSERT INTO messages (body) VALUES ('ok')"))
    assert await bodies(database) == ["taken", "ok"]  # the connection is usable again


async def test_a_python_error_in_a_unit_rolls_back_what_it_sent(
    database: PostgresDatabase,
) -> None:
    def fails_after_a_read(db: Connection) -> None:
        sent = db.execute("INSERT INTO messages (body) VALUES (?)", ("gone",))
        if sent.lastrowid is not None:  # read: sent already
            raise LookupError("changed its mind")

    with pytest.raises(LookupError):
        await database.transaction(fails_after_a_read)

    assert await bodies(database) == []


async def test_a_unit_with_no_statements_sends_nothing(database: PostgresDatabase) -> None:
    with queries_sent(database) as sent:
        assert await database.transaction(lambda db: "nothing") == "nothing"

    assert sent == []


async def test_executemany_is_one_round_trip_and_counts_every_row(
    database: PostgresDatabase,
) -> None:
    rows = [(f"note {n}",) for n in range(50)]

    def many(db: Connection) -> Any:
        return db.executemany("INSERT INTO messages (body) VALUES (?)", rows)

    with queries_sent(database) as sent:
        cursor = await database.transaction(many)

    assert len(sent) == 1
    assert cursor.rowcount == 50
    assert len(await bodies(database)) == 50


@pytest.mark.parametrize(
    "value",
    [
        "it's 100% -- a 'quote', a ? and a %s",
        "back\\slash and \\x00-looking text",
        "line one\nline two; DROP TABLE messages",
        "émoji 🦀 and 中文",
        "",
    ],
)
async def test_values_bound_on_the_client_come_back_exactly(
    database: PostgresDatabase, value: str
) -> None:
    data = bytes(range(256))

    def store(db: Connection) -> Any:
        new = db.execute(
            "INSERT INTO messages (body, data, n) VALUES (?, ?, ?)", (value, data, 2**62)
        )
        return db.execute("SELECT body, data, n FROM messages WHERE id = ?", (new.lastrowid,))

    cursor = await database.transaction(store)

    assert cursor.fetchone() == (value, data, 2**62)
    assert await database.fetchone("SELECT body FROM messages") == (value,)


async def test_a_row_read_after_the_commit_is_there(database: PostgresDatabase) -> None:
    """A unit may hand back a statement whose rows nobody read yet: the commit sent it."""

    def hands_back(db: Connection) -> Any:
        return db.execute("INSERT INTO messages (body) VALUES (?) RETURNING body", ("late",))

    cursor = await database.transaction(hands_back)

    assert cursor.fetchall() == [("late",)]


def usage_row(db: Connection) -> None:
    db.execute("INSERT INTO messages (body) VALUES ('usage')")


def taken_row(db: Connection) -> None:
    db.execute("INSERT INTO messages (body) VALUES ('taken')")


async def test_a_row_no_caller_waits_for_rides_on_the_next_transaction(
    database: PostgresDatabase,
) -> None:
    database.soon(usage_row)

    def one_write(db: Connection) -> None:
        db.execute("INSERT INTO messages (body) VALUES (?)", ("reply",))

    with queries_sent(database) as sent:
        await database.transaction(one_write)

    assert len(sent) == 1  # its savepoint and insert went with the commit
    assert await bodies(database) == ["reply", "usage"]


async def test_a_row_that_fails_is_dropped_and_the_transaction_it_rode_on_commits(
    database: PostgresDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))
    database.soon(taken_row)

    await database.transaction(
        lambda db: db.execute("INSERT INTO messages (body) VALUES (?)", ("reply",))
    )

    assert await bodies(database) == ["taken", "reply"]
    assert "1 rows no caller waited for could not be written" in caplog.text


async def test_rows_waiting_on_a_transaction_that_fails_go_with_the_next(
    database: PostgresDatabase,
) -> None:
    await database.write("INSERT INTO messages (body) VALUES (?)", ("taken",))
    database.soon(usage_row)

    with pytest.raises(StoreError):
        await database.transaction(
            lambda db: db.execute("INSERT INTO messages (body) VALUES (?)", ("taken",))
        )
    assert await bodies(database) == ["taken"]
    await database.transaction(
        lambda db: db.execute("INSERT INTO messages (body) VALUES (?)", ("next",))
    )

    assert await bodies(database) == ["taken", "next", "usage"]


async def test_waiting_rows_are_written_when_a_reader_asks(database: PostgresDatabase) -> None:
    database.soon(usage_row)

    await database.write_soon_rows()

    assert await bodies(database) == ["usage"]


async def test_waiting_rows_with_no_transaction_to_ride_on_commit_on_their_own(
    database: PostgresDatabase,
) -> None:
    """After SOON_WAIT (a second): a usage row is never held longer than that."""
    database.soon(usage_row)
    assert await bodies(database) == []

    async with asyncio.timeout(10):
        while not await bodies(database):
            await asyncio.sleep(0.05)

    assert await bodies(database) == ["usage"]
