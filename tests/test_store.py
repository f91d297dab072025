"""The SQLite store: WAL, foreign keys, versioned migrations, clear errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from clawbot.errors import StoreError
from clawbot.migrations import migrations
from clawbot.sessions import Session
from clawbot.store import Store


async def test_a_new_database_is_migrated_to_the_latest_schema(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    try:
        assert await store.schema_version() == migrations()[-1][0]
    finally:
        await store.close()


async def test_the_database_uses_wal_and_enforces_foreign_keys(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    await store.close()
    raw = sqlite3.connect(tmp_path / "db.sqlite")
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()
    store = await Store.open(tmp_path / "db.sqlite")
    try:
        with pytest.raises(StoreError):
            await store.transaction(
                lambda db: db.execute(
                    "INSERT INTO messages (session_key, epoch, role, content_json,"
                    " provenance_json, created_at) VALUES ('nope', 0, 'user', '[]', '{}', 'now')"
                )
            )
    finally:
        await store.close()


async def test_reopening_applies_no_migration_twice(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    await store.create_session(Session(key="k", channel="c", chat_id="1", agent_id="main"))
    await store.close()

    store = await Store.open(tmp_path / "db.sqlite")
    try:
        assert await store.list_sessions() == ["k"]
    finally:
        await store.close()


async def test_a_database_from_a_newer_clawbot_is_refused(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "db.sqlite")
    raw.execute("PRAGMA user_version=9999")
    raw.close()

    with pytest.raises(StoreError, match="newer clawbot"):
        await Store.open(tmp_path / "db.sqlite")


async def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "db.sqlite").write_bytes(b"garbage" * 1000)

    with pytest.raises(StoreError, match="damaged or not a clawbot database"):
        await Store.open(tmp_path / "db.sqlite")


async def test_a_failed_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "db.sqlite")
    session = await store.create_session(
        Session(key="k", channel="c", chat_id="1", agent_id="main")
    )

    def half_then_fail(db: sqlite3.Connection) -> None:
        db.execute("UPDATE sessions SET agent_id = 'other' WHERE key = 'k'")
        raise sqlite3.OperationalError("disk I/O error")

    try:
        with pytest.raises(StoreError):
            await store.transaction(half_then_fail)
        stored = await store.get_session("k")
        assert stored is not None and stored.agent_id == session.agent_id
    finally:
        await store.close()


async def test_a_read_only_database_gets_a_clear_reply_and_the_bot_keeps_serving(
    bot, chat, channel, scripted
) -> None:
    await chat.say("first")
    await bot.store._conn.execute("PRAGMA query_only=ON")

    refused = await chat.say("second")

    assert refused.kind == "error"
    assert "is read-only" in channel.texts[-1]
    assert "make the file and its folder writable" in channel.texts[-1]
    await bot.store._conn.execute("PRAGMA query_only=OFF")
    answered = await chat.say("third")
    assert answered.kind == "turn"
    stored = await bot.store.load_transcript("memory:chat1", 0)
    assert [e.text for e in stored] == ["first", "ok", "third", "ok"]
