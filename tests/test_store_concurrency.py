"""Writes run on the event loop's thread only when aiosqlite's thread is idle, wait for another
process's lock without blocking the loop, and the WAL is checkpointed in the background."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import clawbot.store.database
import clawbot.store.sqlite_errors
from clawbot.app import Clawbot
from clawbot.errors import StoreError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import STORE_SESSION as SESSION
from .conftest import sqlite_store


def answer(text: str, turn_id: str) -> TranscriptEntry:
    return TranscriptEntry(role="assistant", content=(TextBlock(text=text),), turn_id=turn_id)


def entry(text: str) -> TranscriptEntry:
    return TranscriptEntry(role="user", content=(TextBlock(text=text),))


async def test_a_write_issued_after_a_pending_read_is_not_seen_by_that_read(
    store: SqliteStore,
) -> None:
    read = asyncio.ensure_future(store.transcripts.count(SESSION.key))
    await asyncio.sleep(0)  # the read is now queued on aiosqlite's thread

    await store.transcripts.append(SESSION, [entry("later")])

    assert await read == 0
    assert await store.transcripts.count(SESSION.key) == 1


async def test_a_write_waits_for_another_process_lock_while_the_loop_keeps_serving(
    store: SqliteStore, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "clawbot.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    write = asyncio.ensure_future(store.transcripts.append(SESSION, [entry("waited")]))
    # Had the write waited inside SQLite, these passes of the loop would have stalled until it
    # failed; instead it is still pending, backing off, while the loop goes on.
    for _ in range(20):
        await asyncio.sleep(0)
    assert not write.done()

    other.execute("ROLLBACK")
    other.close()
    await write

    stored = await store.transcripts.load(SESSION.key, 0)
    assert [e.text for e in stored] == ["waited"]


async def test_a_lock_held_too_long_gets_a_clear_error_and_writes_nothing(
    store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clawbot.store.sqlite_errors, "BUSY_WAIT", 0.05)
    other = sqlite3.connect(tmp_path / "clawbot.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked by another process") as raised:
            await store.transcripts.append(SESSION, [entry("lost")])
    finally:
        other.execute("ROLLBACK")
        other.close()

    assert "no other clawbot runs on the same CLAWBOT_HOME" in raised.value.hint
    assert await store.transcripts.count(SESSION.key) == 0


async def test_the_wal_stays_small_because_it_is_checkpointed_in_the_background(
    store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clawbot.store.database, "CHECKPOINT_EVERY_ROWS", 10)
    wal = tmp_path / "clawbot.db-wal"
    sizes = []
    for n in range(300):
        await store.transcripts.append(SESSION, [entry(f"message {n} " + "x" * 2000)])
        if store.database._checkpointing is not None:
            await store.database._checkpointing
        sizes.append(wal.stat().st_size)

    assert await store.transcripts.count(SESSION.key) == 300
    # Without checkpoints these 300 commits grow the WAL past 6 MB; with one every 10 commits
    # the file is reused from its start and stops growing.
    assert max(sizes) < 1_000_000
    assert sizes[-1] == sizes[100]


async def test_journalled_turns_a_hundred_to_a_commit_still_keep_the_wal_small(
    store: SqliteStore, tmp_path: Path
) -> None:
    wal = tmp_path / "clawbot.db-wal"
    sizes = []
    for n in range(3000):
        job = TurnJob(id=f"job{n}", session_key=SESSION.key, status="running")
        question = entry(f"question {n} " + "x" * 1000)
        await store.jobs.submit(SESSION, job, entry=question, dedup_id=f"m{n}")
        await store.jobs.finish(SESSION, job.id, [answer(f"answer {n} " + "y" * 1000, job.id)])
        if store.database._checkpointing is not None:
            await store.database._checkpointing
        sizes.append(wal.stat().st_size if wal.exists() else 0)

    assert await store.transcripts.count(SESSION.key) == 6000
    # Each commit carries a hundred journalled turns, so counting commits between
    # checkpoints let these 30 commits grow the WAL past 12 MB; counting rows keeps it
    # within about a megabyte per checkpoint interval.
    assert max(sizes) < 4_000_000


async def test_a_bot_under_steady_load_keeps_its_wal_small(
    settings: Settings, scripted: ScriptedModel
) -> None:
    scripted.function = lambda request: "ok " + "z" * 2000
    wal = settings.home / "clawbot.db-wal"
    sizes = []
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        database = sqlite_store(bot).database
        for round_ in range(12):
            await asyncio.gather(
                *(
                    bot.router.handle(
                        channel.message(
                            f"{round_} " + "x" * 2000, chat_id=f"c{n}", sender_id=f"u{n}"
                        )
                    )
                    for n in range(100)
                )
            )
            if database._checkpointing is not None:
                await database._checkpointing
            sizes.append(wal.stat().st_size)

    assert len(channel.sent) == 1200
    # About 4 KB of WAL a turn: checkpointed without the restart, the WAL grew 3 MB a round
    # (24 MB after 8 rounds, 36 MB after 12); with it, it stays near 12 MB. A restart that
    # finds a reader still in the WAL under load gives up until the next checkpoint, so a
    # round's growth may add once (16.0 MB in one loaded run): bounded, not near 24 MB.
    assert max(sizes) < 24_000_000
    assert sizes[-1] <= max(sizes[:6]) + 4_000_000


async def test_a_wal_grown_by_a_burst_shrinks_back_once_checkpointed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clawbot.store.database, "WAL_SIZE_LIMIT", 200_000)
    monkeypatch.setattr(
        clawbot.store.database, "CHECKPOINT_EVERY_ROWS", 1_000_000
    )  # the burst outruns it
    wal = tmp_path / "clawbot.db-wal"
    store = await SqliteStore.open(tmp_path / "clawbot.db")
    try:
        await store.sessions.create(SESSION)
        for n in range(300):
            await store.transcripts.append(SESSION, [entry(f"message {n} " + "x" * 2000)])
        grown = wal.stat().st_size
        monkeypatch.setattr(clawbot.store.database, "CHECKPOINT_EVERY_ROWS", 1)
        await store.transcripts.append(SESSION, [entry("the burst is over")])
        assert store.database._checkpointing is not None
        await store.database._checkpointing
        await store.transcripts.append(SESSION, [entry("the WAL starts over")])

        assert grown > 1_000_000
        assert wal.stat().st_size <= 200_000
        assert await store.transcripts.count(SESSION.key) == 302
    finally:
        await store.close()


def insert(text: str) -> Callable[[sqlite3.Connection], None]:
    """A grouped write: one transcript row."""

    def write(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT INTO messages (session_key, epoch, role, content_json, provenance_json,"
            " created_at) VALUES (?, 0, 'user', ?, '{}', '2030-01-01T00:00:00+00:00')",
            (SESSION.key, f'[{{"type": "text", "text": "{text}"}}]'),
        )

    return write


async def test_grouped_writes_wait_for_another_process_lock_and_all_land_in_order(
    store: SqliteStore, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "clawbot.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    first = asyncio.ensure_future(store.grouped(insert("first")))
    second = asyncio.ensure_future(store.grouped(insert("second")))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not first.done() and not second.done()
    third = asyncio.ensure_future(store.grouped(insert("third")))

    other.execute("ROLLBACK")
    other.close()
    await asyncio.gather(first, second, third)

    stored = await store.transcripts.load(SESSION.key, 0)
    assert [e.text for e in stored] == ["first", "second", "third"]


async def test_a_failing_write_in_a_group_fails_alone(store: SqliteStore) -> None:
    def broken(db: sqlite3.Connection) -> None:
        insert("rolled back")(db)
        raise ValueError("this write is refused")

    results = await asyncio.gather(
        store.grouped(insert("kept")),
        store.grouped(broken),
        return_exceptions=True,
    )

    assert results[0] is None
    assert isinstance(results[1], ValueError)
    assert [e.text for e in await store.transcripts.load(SESSION.key, 0)] == ["kept"]


async def test_a_lone_failing_write_reports_its_error_and_leaves_nothing(
    store: SqliteStore,
) -> None:
    def broken(db: sqlite3.Connection) -> None:
        insert("rolled back")(db)
        raise ValueError("this write is refused")

    with pytest.raises(ValueError, match="refused"):
        await store.grouped(broken)

    assert await store.transcripts.count(SESSION.key) == 0
