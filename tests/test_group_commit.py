"""Group commit: concurrent scheduling writes share commits (the first write of a loop pass
commits at once, the rest of the pass together), each still all-or-nothing."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from clawbot.errors import StoreError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.store import SqliteStore, riding_rows


def item(job_id: str) -> BacklogItem:
    entry = TranscriptEntry(role="user", content=(TextBlock(text=job_id),), turn_id=job_id)
    return BacklogItem(kind="message", job_id=job_id, entry=entry)


async def test_concurrent_submits_are_all_stored_and_a_redelivery_among_them_is_dropped(
    store: SqliteStore,
) -> None:
    session = await store.sessions.get("m:a")
    assert session is not None
    ids = [f"job{n}" for n in range(20)]
    dedup = [f"m{n}" for n in range(19)] + ["m3"]

    stored = await asyncio.gather(
        *(
            store.jobs.submit(session, TurnJob(id=i, session_key="m:a"), item=item(i), dedup_id=d)
            for i, d in zip(ids, dedup, strict=True)
        )
    )

    assert stored == [True] * 19 + [False]
    assert [stored.item.job_id for stored in await store.backlog.items("m:a")] == ids[:19]
    assert len(await store.jobs.for_session("m:a")) == 19


async def test_a_failing_write_in_a_shared_commit_is_rolled_back_alone(store: SqliteStore) -> None:
    def insert(name: str, fail: bool = False) -> Awaitable[None]:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO inbound_seen (channel, chat_id, message_id, session_key,"
                " received_at) VALUES ('m', 'a', ?, 'm:a', 'now')",
                (name,),
            )
            if fail:
                db.execute("INSERT INTO no_such_table VALUES (1)")

        return store.grouped(work)

    results = await asyncio.gather(
        insert("one"),
        insert("two"),
        insert("bad", fail=True),
        insert("three"),
        return_exceptions=True,
    )

    assert [results[0], results[1], results[3]] == [None, None, None]
    assert isinstance(results[2], StoreError)
    async with store.database._conn.execute(
        "SELECT message_id FROM inbound_seen ORDER BY 1"
    ) as cursor:
        rows = [message_id for (message_id,) in await cursor.fetchall()]
    assert rows == ["one", "three", "two"]


def count_commits(store: SqliteStore) -> list[str]:
    """The COMMIT statements the store's connection runs from now on."""
    commits: list[str] = []
    store.database._conn._conn.set_trace_callback(
        lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None
    )
    return commits


async def test_a_burst_of_writes_takes_two_commits_the_first_at_once(store: SqliteStore) -> None:
    session = await store.sessions.get("m:a")
    assert session is not None
    commits = count_commits(store)

    stored = await asyncio.gather(
        *(
            store.jobs.submit(
                session, TurnJob(id=f"job{n}", session_key="m:a"), item=item(f"job{n}")
            )
            for n in range(20)
        )
    )

    assert stored == [True] * 20
    assert len(commits) == 2
    assert len(await store.jobs.for_session("m:a")) == 20


async def test_a_lone_write_is_committed_before_the_loop_turns(store: SqliteStore) -> None:
    session = await store.sessions.get("m:a")
    assert session is not None
    loop_turned = asyncio.Event()
    asyncio.get_running_loop().call_soon(loop_turned.set)

    await store.jobs.submit(session, TurnJob(id="job1", session_key="m:a"), item=item("job1"))

    assert not loop_turned.is_set()
    with sqlite3.connect(store.path) as other:
        assert other.execute("SELECT id FROM turn_jobs").fetchall() == [("job1",)]


# writes nobody waits for (a usage row) ------------------------------------------------


def seen(name: str) -> Callable[[sqlite3.Connection], None]:
    def work(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT INTO inbound_seen (channel, chat_id, message_id, session_key,"
            " received_at) VALUES ('m', 'a', ?, 'm:a', 'now')",
            (name,),
        )

    return work


async def seen_ids(store: SqliteStore) -> list[str]:
    async with store.database._conn.execute(
        "SELECT message_id FROM inbound_seen ORDER BY 1"
    ) as cursor:
        return [message_id for (message_id,) in await cursor.fetchall()]


async def test_a_write_nobody_waits_for_rides_on_the_next_commit(store: SqliteStore) -> None:
    commits = count_commits(store)

    store.database.soon(seen("usage row"))
    written_before = await seen_ids(store)
    await store.grouped(seen("a message"))

    assert written_before == []
    assert await seen_ids(store) == ["a message", "usage row"]
    assert len(commits) == 1


async def test_a_write_nobody_waits_for_commits_on_its_own_when_no_other_comes(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(riding_rows, "SOON_WAIT", 0)

    store.database.soon(seen("usage row"))
    for _ in range(100):
        await asyncio.sleep(0)  # a loop pass: no timer waits in the test

    assert await seen_ids(store) == ["usage row"]


async def test_a_failing_write_nobody_waits_for_never_fails_the_commit_it_rides_on(
    store: SqliteStore,
) -> None:
    def broken(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO no_such_table VALUES (1)")

    store.database.soon(broken)
    await store.grouped(seen("a message"))

    assert await seen_ids(store) == ["a message"]


async def test_a_read_of_their_table_and_a_close_write_what_waits_first(tmp_path: Path) -> None:
    opened = await SqliteStore.open(tmp_path / "soon.db")
    opened.database.soon(seen("read"))
    other_read = await opened.database.fetchall("SELECT message_id FROM inbound_seen")
    await opened.database.write_soon_rows()
    read = await opened.database.fetchall("SELECT message_id FROM inbound_seen")
    opened.database.soon(seen("closed"))
    await opened.close()
    reopened = await SqliteStore.open(tmp_path / "soon.db")
    try:
        assert other_read == []  # another table's read pays no commit for them
        assert read == [("read",)]
        assert await seen_ids(reopened) == ["closed", "read"]
    finally:
        await reopened.close()
