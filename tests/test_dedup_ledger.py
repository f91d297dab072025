"""The dedup ledger: a platform message id is taken once; ids far older than any
redelivery are forgotten, so the ledger stays bounded."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.routing.sessions import Session
from clawbot.scheduling.housekeeping import SEEN_FORGET_EVERY, SEEN_RETENTION
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.testing import MemoryChannel

from .conftest import STORE_SESSION, Chat, sqlite_store
from .test_store import _database_at_schema

UPGRADED = Session(key="memory:chat1", channel="memory", chat_id="chat1", agent_id="main")


async def _age(store: SqliteStore, message_id: str, days: float) -> None:
    """Make the ledger say ``message_id`` was taken ``days`` ago."""
    then = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    await store.transaction(
        lambda db: db.execute(
            "UPDATE inbound_seen SET received_at = ? WHERE message_id = ?", (then, message_id)
        )
    )


async def _taken(store: SqliteStore, ids: list[str], days_ago: float) -> None:
    """Put ``ids`` in the ledger as taken ``days_ago``."""
    then = (datetime.now(UTC) - timedelta(days=days_ago)).isoformat()
    await store.transaction(
        lambda db: db.executemany(
            "INSERT INTO inbound_seen (channel, chat_id, message_id, session_key, received_at)"
            " VALUES ('m', 'a', ?, 'm:a', ?)",
            [(message_id, then) for message_id in ids],
        )
    )


async def _ledger(store: SqliteStore) -> list[str]:
    rows = await store.database.fetchall("SELECT message_id FROM inbound_seen")
    return [message_id for (message_id,) in rows]


async def test_ids_past_the_retention_are_forgotten_and_newer_ones_still_drop_redeliveries(
    bot: Clawbot, chat: Chat
) -> None:
    await chat.say("old news", message_id="m1")
    await chat.say("fresh news", message_id="m2")
    await _age(sqlite_store(bot), "m1", days=8)

    forgotten = await bot.store.ledger.forget_older_than(timedelta(days=7))

    assert forgotten == 1
    assert (await chat.say("fresh news", message_id="m2")).kind == "duplicate"
    assert (await chat.say("old news", message_id="m1")).kind == "turn"


async def test_a_large_ledger_is_forgotten_chunk_by_chunk_down_to_its_last_old_id(
    store: SqliteStore,
) -> None:
    await _taken(store, [f"old{n}" for n in range(25)], days_ago=30)
    await _taken(store, [f"new{n}" for n in range(3)], days_ago=0)

    forgotten = await store.ledger.forget_older_than(timedelta(days=7), chunk=10)

    assert forgotten == 25
    assert sorted(await _ledger(store)) == ["new0", "new1", "new2"]


async def test_pruning_leaves_the_event_loop_free_while_sqlite_works(store: SqliteStore) -> None:
    await _taken(store, [f"old{n}" for n in range(2_000)], days_ago=30)

    pruning = asyncio.ensure_future(store.ledger.forget_older_than(timedelta(days=7), chunk=100))
    turns_of_the_loop = 0
    while not pruning.done():
        turns_of_the_loop += 1
        await asyncio.sleep(0)

    assert await pruning == 2_000
    assert turns_of_the_loop >= 20  # at least one per chunk: it never held the loop


async def test_messages_arriving_while_a_large_ledger_is_pruned_are_all_stored_once(
    store: SqliteStore,
) -> None:
    await _taken(store, [f"old{n}" for n in range(20_000)], days_ago=30)

    async def arrive(n: int) -> bool:
        await asyncio.sleep(0)
        job = TurnJob(id=f"turn-{n}", session_key=STORE_SESSION.key)
        return await store.jobs.submit(STORE_SESSION, job, dedup_id=f"new{n}")

    forgotten, *stored = await asyncio.gather(
        store.ledger.forget_older_than(timedelta(days=7), chunk=1_000),
        *(arrive(n) for n in range(50)),
    )
    again = await store.jobs.submit(
        STORE_SESSION, TurnJob(id="turn-again", session_key=STORE_SESSION.key), dedup_id="new7"
    )

    assert forgotten == 20_000
    assert stored == [True] * 50
    assert again is False
    assert sorted(await _ledger(store)) == sorted(f"new{n}" for n in range(50))


async def test_housekeeping_forgets_old_ids_once_a_day(settings: Settings) -> None:
    clock = ManualClock()
    async with await Clawbot.open(settings, clock=clock) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        chat = Chat(bot, channel)
        for message_id in ("m1", "m2", "m3"):
            await chat.say("hello", message_id=message_id)
        old = SEEN_RETENTION.days + 1

        await _age(sqlite_store(bot), "m1", days=old)
        await bot.scheduler.tick()
        after_first = sorted(await _ledger(sqlite_store(bot)))
        await _age(sqlite_store(bot), "m2", days=old)
        await bot.scheduler.tick()
        same_day = sorted(await _ledger(sqlite_store(bot)))
        clock.advance(SEEN_FORGET_EVERY)
        await bot.scheduler.tick()
        next_day = sorted(await _ledger(sqlite_store(bot)))

    assert after_first == ["m2", "m3"]
    assert same_day == ["m2", "m3"]
    assert next_day == ["m3"]


async def test_an_upgraded_ledger_still_drops_the_ids_it_took_and_is_clustered_on_its_key(
    tmp_path: Path,
) -> None:
    raw = _database_at_schema(tmp_path / "db.sqlite", 7)
    raw.execute(
        "INSERT INTO sessions (key, channel, chat_id, agent_id, created_at, updated_at)"
        " VALUES ('memory:chat1', 'memory', 'chat1', 'main', 'then', 'then')"
    )
    raw.execute(
        "INSERT INTO inbound_seen (channel, chat_id, message_id, session_key, received_at)"
        " VALUES ('memory', 'chat1', 'm1', 'memory:chat1', ?)",
        (datetime.now(UTC).isoformat(),),
    )
    raw.commit()
    raw.close()

    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        taken = [
            await store.jobs.submit(
                UPGRADED, TurnJob(id=job, session_key=UPGRADED.key), dedup_id=mid
            )
            for job, mid in (("turn-1", "m1"), ("turn-2", "m2"))
        ]
    finally:
        await store.close()

    assert taken == [False, True]
    raw = sqlite3.connect(tmp_path / "db.sqlite")
    try:
        (schema,) = raw.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'inbound_seen'"
        ).fetchone()
        indexes = raw.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'inbound_seen'"
        ).fetchall()
    finally:
        raw.close()
    assert "WITHOUT ROWID" in schema
    assert indexes == []
