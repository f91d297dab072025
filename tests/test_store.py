"""The SQLite store: WAL, foreign keys, versioned migrations, clear errors."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from clawbot.app import Clawbot
from clawbot.clock import ManualClock
from clawbot.errors import StoreError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import JobSummary, SqliteStore, new_id
from clawbot.store.database import Database
from clawbot.store.migrations import migrations, statements
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import Chat, sqlite_store

T = TypeVar("T")


async def test_a_new_database_is_migrated_to_the_latest_schema(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        assert await store.schema_version() == migrations()[-1].number
    finally:
        await store.close()


async def test_the_database_uses_wal_and_enforces_foreign_keys(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    await store.close()
    raw = sqlite3.connect(tmp_path / "db.sqlite")
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()
    await assert_a_row_of_a_missing_session_is_refused(tmp_path / "db.sqlite")


async def assert_a_row_of_a_missing_session_is_refused(path: Path) -> None:
    store = await SqliteStore.open(path)
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
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    await store.sessions.create(Session(key="k", channel="c", chat_id="1", agent_id="main"))
    await store.close()

    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        assert await store.sessions.keys() == ["k"]
    finally:
        await store.close()


async def test_migrations_another_process_applied_meanwhile_are_not_applied_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes opening a new home at once (a bot starting while an operator runs
    `clawbot pairing list`): the one that read the version before the other migrated
    finds each migration done once it holds the write lock, and opens cleanly."""
    _database_at_schema(tmp_path / "db.sqlite", migrations()[-1].number).close()

    async def read_before_the_other_migrated(_database: Database) -> int:
        return 0

    monkeypatch.setattr(Database, "schema_version", read_before_the_other_migrated)
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    await store.close()

    raw = sqlite3.connect(tmp_path / "db.sqlite")
    try:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == migrations()[-1].number
    finally:
        raw.close()


async def test_a_database_from_a_newer_clawbot_is_refused(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "db.sqlite")
    raw.execute("PRAGMA user_version=9999")
    raw.close()

    with pytest.raises(StoreError, match="newer clawbot"):
        await SqliteStore.open(tmp_path / "db.sqlite")


async def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "db.sqlite").write_bytes(b"garbage" * 1000)

    with pytest.raises(StoreError, match="damaged or not a clawbot database"):
        await SqliteStore.open(tmp_path / "db.sqlite")


async def test_a_failed_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    session = await store.sessions.create(
        Session(key="k", channel="c", chat_id="1", agent_id="main")
    )

    def half_then_fail(db: sqlite3.Connection) -> None:
        db.execute("UPDATE sessions SET agent_id = 'other' WHERE key = 'k'")
        raise sqlite3.OperationalError("disk I/O error")

    try:
        with pytest.raises(StoreError):
            await store.transaction(half_then_fail)
        stored = await store.sessions.get("k")
        assert stored is not None and stored.agent_id == session.agent_id
    finally:
        await store.close()


async def replies_marked(bot: Clawbot) -> None:
    """Wait until every reply is marked sent in the database: the marks go in
    a moment after the reply (a timer), and a mark that found the database read-only would
    make it refuse the next message up front (a loaded machine did that once)."""
    unmarked = "SELECT count(*) FROM turn_jobs WHERE replied = 0"
    async with asyncio.timeout(10):
        while (await sqlite_store(bot).database.fetchone(unmarked))[0]:
            await asyncio.sleep(0.02)


async def test_a_database_that_turns_read_only_loses_nothing_and_refuses_clearly_until_fixed(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await chat.say("first")
    await replies_marked(bot)  # nothing of "first" is on its way to SQLite
    await sqlite_store(bot).database._conn.execute("PRAGMA query_only=ON")

    kept = await chat.say("second")  # answered: it and its answer are in the intake journal
    with pytest.raises(StoreError, match="is read-only"):
        await bot.store.flush()  # the write-behind finds out (it logs and retries)
    refused = await chat.say("third")  # known unwritable now: refused before the model
    refused_text = channel.texts[-1]
    await sqlite_store(bot).database._conn.execute("PRAGMA query_only=OFF")
    answered = await chat.say("fourth")

    assert kept.kind == "turn" and kept.reply == "ok"
    assert refused.kind == "error"
    assert "is read-only" in refused_text
    assert "make the file and its folder writable" in refused_text
    assert answered.kind == "turn"
    stored = await bot.store.transcripts.load("memory:chat1", 0)
    assert [e.text for e in stored] == ["first", "ok", "second", "ok", "fourth", "ok"]
    jobs = await bot.store.jobs.for_session("memory:chat1")
    assert [j.status for j in jobs] == ["done", "done", "done"]
    assert len(scripted.requests) == 3  # "third" never reached the model


async def test_a_turn_whose_answer_cannot_be_stored_is_reported_and_closed_once_it_can(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    async def answer_after_the_disk_turned_read_only(request: object) -> str:
        await bot.store.flush()  # the message reached SQLite (as a read would make it)
        await sqlite_store(bot).database._conn.execute("PRAGMA query_only=ON")
        return "an answer that cannot be stored"

    scripted.function = answer_after_the_disk_turned_read_only
    failed = await chat.say("hello")
    told = channel.texts[-1]
    await sqlite_store(bot).database._conn.execute("PRAGMA query_only=OFF")
    await bot.scheduler.tick()
    jobs = await bot.store.jobs.for_session("memory:chat1")

    assert failed.kind == "turn"
    assert "is read-only" in told and "make the file and its folder writable" in told
    assert [(j.status, j.error) for j in jobs] == [("failed", "internal error")]


def _database_at_schema(path: Path, version: int) -> sqlite3.Connection:
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA foreign_keys=ON")
    for number, _name, script in migrations():
        if number <= version:
            raw.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={number};\nCOMMIT;")
    return raw


async def test_upgrading_an_older_database_keeps_its_transcripts_jobs_and_references(
    tmp_path: Path,
) -> None:
    raw = _database_at_schema(tmp_path / "db.sqlite", 4)
    raw.execute(
        "INSERT INTO sessions (key, channel, chat_id, agent_id, created_at, updated_at)"
        " VALUES ('s', 'console', '1', 'main', 'then', 'then')"
    )
    for text in ("hello", "hi there"):
        raw.execute(
            "INSERT INTO messages (session_key, epoch, role, content_json, provenance_json,"
            " turn_id, created_at) VALUES ('s', 0, 'user', ?, '{}', 'turn-1', 'then')",
            (f'[{{"type": "text", "text": "{text}"}}]',),
        )
    raw.execute(
        "INSERT INTO turn_jobs (id, session_key, status, attempts, input_message_id, replied,"
        " created_at, updated_at) VALUES ('turn-1', 's', 'done', 1, 2, 1, 'then', 'then')"
    )
    raw.execute(
        "INSERT INTO backlog (session_key, job_id, kind, payload_json, created_at)"
        " VALUES ('s', 'turn-1', 'message', ?, 'then')",
        (BacklogItem(kind="message", job_id="turn-1").model_dump_json(),),
    )
    raw.close()

    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        assert await store.transcripts.count("s") == 2
        assert await store.jobs.get("turn-1") == JobSummary(
            id="turn-1",
            session_key="s",
            lane="main",
            status="done",
            attempts=1,
            error=None,
        )
        assert [stored.session_key for stored in await store.backlog.items()] == ["s"]
    finally:
        await store.close()
    raw = sqlite3.connect(tmp_path / "db.sqlite")
    try:
        assert raw.execute("SELECT input_message_id FROM turn_jobs").fetchone() == (2,)
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        schema = dict(raw.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
        assert "AUTOINCREMENT" not in schema["messages"]
        assert "WITHOUT ROWID" in schema["turn_jobs"]
    finally:
        raw.close()


async def test_an_upgraded_database_still_finds_its_open_jobs_and_unsent_replies(
    tmp_path: Path,
) -> None:
    raw = _database_at_schema(tmp_path / "db.sqlite", 6)
    raw.execute(
        "INSERT INTO sessions (key, channel, chat_id, agent_id, created_at, updated_at)"
        " VALUES ('s', 'console', '1', 'main', 'then', 'then')"
    )
    jobs = [  # id, status, owner, merged into, replied
        ("turn-1", "done", "gone", None, 1),
        ("turn-2", "done", "gone", None, 0),
        ("turn-3", "done", "gone", "turn-2", 0),
        ("turn-4", "queued", None, None, 0),
    ]
    raw.executemany(
        "INSERT INTO turn_jobs (id, session_key, status, owner, merged_into, replied,"
        " created_at, updated_at) VALUES (?, 's', ?, ?, ?, ?, ?, ?)",
        [(*job, "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00") for job in jobs],
    )
    raw.commit()
    raw.close()

    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        assert [job.id for job in await store.jobs.open()] == ["turn-4"]
        assert [job.id for job in await store.jobs.unreplied()] == ["turn-2"]
        pending = await store.database.fetchall(
            "SELECT id FROM turn_jobs WHERE replied = 0 ORDER BY id"
        )
        assert pending == [("turn-2",), ("turn-4",)]
    finally:
        await store.close()


async def test_foreign_keys_are_enforced_again_after_an_upgrade(tmp_path: Path) -> None:
    _database_at_schema(tmp_path / "db.sqlite", 4).close()

    await assert_a_row_of_a_missing_session_is_refused(tmp_path / "db.sqlite")


def test_new_ids_are_unique_and_ordered_by_their_microsecond() -> None:
    ids = [new_id("turn") for _ in range(20_000)]

    assert len(set(ids)) == len(ids)
    assert all(i.startswith("turn_") and len(i) == len("turn_") + 19 for i in ids)
    stamps = [i[5:18] for i in ids]  # microseconds since the epoch, fixed-width hex
    assert stamps == sorted(stamps)


async def test_a_session_lookup_answers_without_waiting_for_the_loop(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "clawbot.db")
    try:
        await store.sessions.create(Session(key="m:a", channel="m", chat_id="a", agent_id="main"))
        loop_turned = asyncio.Event()
        asyncio.get_running_loop().call_soon(loop_turned.set)

        session = await store.sessions.get("m:a")
        history = await store.transcripts.load("m:a", 0, limit=20)

        assert not loop_turned.is_set()
        assert session is not None and session.chat_id == "a"
        assert history == []
    finally:
        await store.close()


@pytest.fixture
async def answered(tmp_path: Path) -> AsyncIterator[tuple[SqliteStore, Session, str]]:
    """A store with one finished turn that stored two assistant messages, the last of them
    ("All done.") its final answer."""
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        session = await store.sessions.create(
            Session(key="memory:c1", channel="memory", chat_id="c1", agent_id="main")
        )
        job = TurnJob(id=new_id("turn"), session_key=session.key, status="running", attempts=1)
        await store.jobs.submit(session, job, entry=_said("user", "hi", job.id))
        answers = [_said("assistant", text, job.id) for text in ("Let me look.", "All done.")]
        await store.jobs.finish(session, job.id, answers, status="done")
        yield store, session, job.id
    finally:
        await store.close()


def _said(role: str, text: str, turn_id: str) -> TranscriptEntry:
    return TranscriptEntry(role=role, content=(TextBlock(text=text),), turn_id=turn_id)  # type: ignore[arg-type]


async def _steps(store: SqliteStore, read: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """What ``read`` returned, and the SQLite VM steps (in thousands) it took."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    store.database._conn._conn.set_progress_handler(count, 1000)  # the store's own connection
    try:
        return await read(), steps
    finally:
        store.database._conn._conn.set_progress_handler(None, 1000)


async def test_a_finished_turns_answer_is_read_back_at_the_same_cost_however_long_the_history(
    answered: tuple[SqliteStore, Session, str],
) -> None:
    store, session, job_id = answered
    reply, steps_when_small = await _steps(store, lambda: store.jobs.reply_text(job_id))
    await store.transcripts.append(
        session, [_said("assistant", f"later {n}", "turn_other") for n in range(20_000)]
    )
    again, steps_when_large = await _steps(store, lambda: store.jobs.reply_text(job_id))

    assert reply == again == "All done."
    assert steps_when_large <= steps_when_small + 1


async def test_an_answer_stored_before_turns_pointed_at_their_answers_is_still_found(
    answered: tuple[SqliteStore, Session, str],
) -> None:
    store, _, job_id = answered
    await store.transaction(lambda db: db.execute("UPDATE turn_jobs SET reply_message_id = NULL"))

    assert await store.jobs.reply_text(job_id) == "All done."


async def _to_recover(store: SqliteStore) -> list[list[str]]:
    """The ids of the open and of the unreplied jobs: what start-up recovery reads."""
    return [
        [job.id for job in await store.jobs.open()],
        [j.id for j in await store.jobs.unreplied()],
    ]


async def test_start_up_finds_open_and_unreplied_jobs_at_the_same_cost_however_many_were_answered(
    answered: tuple[SqliteStore, Session, str],
) -> None:
    store, session, _ = answered
    unreplied = TurnJob(
        id=new_id("turn"), session_key=session.key, status="running", owner=store.owner
    )
    await store.jobs.submit(session, unreplied, entry=_said("user", "and?", unreplied.id))
    await store.jobs.finish(session, unreplied.id, [_said("assistant", "Yes.", unreplied.id)])
    waiting = TurnJob(id=new_id("turn"), session_key=session.key)
    await store.jobs.submit(session, waiting, entry=_said("user", "and then?", waiting.id))
    found_when_few, steps_when_few = await _steps(store, lambda: _to_recover(store))
    await store.transaction(
        lambda db: db.executemany(
            "INSERT INTO turn_jobs (id, session_key, status, attempts, owner, replied,"
            " created_at, updated_at) VALUES (?, ?, 'done', 1, 'elsewhere', 1, '', '')",
            [(f"turn_answered_{n:05}", session.key) for n in range(20_000)],
        )
    )
    found_when_many, steps_when_many = await _steps(store, lambda: _to_recover(store))

    assert found_when_few == found_when_many == [[waiting.id], [unreplied.id]]
    assert steps_when_many <= steps_when_few + 1


async def test_once_a_merged_turns_reply_went_out_none_of_its_jobs_is_left_pending(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        session = await store.sessions.create(
            Session(key="memory:c1", channel="memory", chat_id="c1", agent_id="main")
        )
        runner, merged = (TurnJob(id=new_id("turn"), session_key=session.key) for _ in "ab")
        await store.jobs.submit(session, runner, entry=_said("user", "first", runner.id))
        await store.jobs.submit(session, merged, entry=_said("user", "second", merged.id))
        await store.jobs.start(session, runner.id, lease_until=_soon(), carried=[merged.id])
        await store.jobs.finish(session, runner.id, [_said("assistant", "Both done.", runner.id)])
        await store.jobs.mark_replied([runner.id])
        pending = await store.database.fetchall("SELECT id FROM turn_jobs WHERE replied = 0")

        assert await store.jobs.open() == await store.jobs.unreplied() == []
        assert pending == []
        assert [job.status for job in await store.jobs.for_session(session.key)] == [
            "done",
            "done",
        ]
    finally:
        await store.close()


def _soon() -> datetime:
    return datetime.now(UTC) + timedelta(minutes=5)


async def test_a_reply_sent_while_the_database_was_read_only_is_not_sent_again_after_a_restart(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = ManualClock()
    failed = asyncio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "could not record sent replies" in record.getMessage():
                failed.set()

    watch = Watch()
    logging.getLogger("clawbot").addHandler(watch)
    try:
        async with await Clawbot.open(settings, clock=clock) as bot:
            first = MemoryChannel()
            bot.connect(first)
            await bot.router.handle(first.message("hello"))
            await sqlite_store(bot).database._conn.execute("PRAGMA query_only=ON")
            await failed.wait()  # the reply mark could not be written
            await sqlite_store(bot).database._conn.execute("PRAGMA query_only=OFF")
    finally:
        logging.getLogger("clawbot").removeHandler(watch)
    clock.advance(settings.job_lease + 1)
    async with await Clawbot.open(settings, clock=clock) as restarted:
        second = MemoryChannel()
        restarted.connect(second)
        await restarted.start()
        await restarted.scheduler.wait_idle()

    assert first.texts == ["ok"]
    assert second.texts == []


async def test_a_sessions_children_are_the_sessions_it_owns_oldest_first(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        parent = await store.sessions.create(
            Session(key="memory:c1", channel="memory", chat_id="c1", agent_id="main")
        )
        other = await store.sessions.create(
            Session(key="memory:c2", channel="memory", chat_id="c2", agent_id="main")
        )
        for owner, name in ((parent, "first"), (other, "elsewhere"), (parent, "second")):
            await store.sessions.create(
                Session(
                    key=f"internal:{owner.key}/{name}",
                    channel="internal",
                    chat_id=f"{owner.key}/{name}",
                    agent_id="researcher",
                    deliver=False,
                    owner_key=owner.key,
                )
            )

        children = await store.sessions.children(parent.key)

        assert [child.key for child in children] == [
            "internal:memory:c1/first",
            "internal:memory:c1/second",
        ]
        assert all(c.owner_key == parent.key and not c.deliver for c in children)
        assert await store.sessions.children("internal:memory:c1/first") == []
    finally:
        await store.close()


async def test_finding_a_sessions_children_reads_an_index_not_every_session(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        parent = await store.sessions.create(
            Session(key="memory:p", channel="memory", chat_id="p", agent_id="main")
        )
        await store.sessions.create(
            Session(
                key="internal:memory:p/a",
                channel="internal",
                chat_id="memory:p/a",
                agent_id="main",
                owner_key=parent.key,
            )
        )
        found_when_few, steps_when_few = await _steps(
            store, lambda: store.sessions.children(parent.key)
        )
        await store.transaction(
            lambda db: db.executemany(
                "INSERT INTO sessions (key, channel, chat_id, agent_id, created_at, updated_at)"
                " VALUES (?, 'memory', ?, 'main', '', '')",
                [(f"memory:{n:05}", f"{n:05}") for n in range(20_000)],
            )
        )
        found_when_many, steps_when_many = await _steps(
            store, lambda: store.sessions.children(parent.key)
        )

        assert [c.key for c in found_when_few] == [c.key for c in found_when_many]
        assert steps_when_many <= steps_when_few + 1
    finally:
        await store.close()


async def test_a_sessions_activity_is_its_latest_turn_when_it_began_and_how_many(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        busy, idle, quiet = [
            await store.sessions.create(
                Session(key=f"memory:{name}", channel="memory", chat_id=name, agent_id="main")
            )
            for name in ("busy", "idle", "quiet")
        ]
        first = TurnJob(id=new_id("turn"), session_key=busy.key, status="running", attempts=1)
        await store.jobs.submit(busy, first, entry=_said("user", "one", first.id))
        await store.jobs.finish(busy, first.id, [_said("assistant", "1", first.id)])
        second = TurnJob(id=new_id("turn"), session_key=busy.key)
        await store.jobs.submit(busy, second, entry=_said("user", "two", second.id))
        once = TurnJob(id=new_id("turn"), session_key=idle.key, status="running", attempts=1)
        await store.jobs.submit(idle, once, entry=_said("user", "hi", once.id))
        await store.jobs.close([once.id], "cancelled", "stopped by /stop")

        activity = await store.jobs.activity([quiet.key, idle.key, busy.key])

        assert [(a.session_key, a.latest.id, a.latest.status, a.turns) for a in activity] == [
            (idle.key, once.id, "cancelled", 1),
            (busy.key, second.id, "queued", 2),
        ]
        assert activity[1].first_at <= activity[1].latest_at
    finally:
        await store.close()


async def test_the_owners_are_the_sessions_with_children_in_the_order_of_their_first_child(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "db.sqlite")
    try:
        for name in ("lonely", "late", "early"):
            await store.sessions.create(
                Session(key=f"memory:{name}", channel="memory", chat_id=name, agent_id="main")
            )
        for owner in ("early", "late", "early"):
            key = f"internal:memory:{owner}/{new_id('c')}"
            await store.sessions.create(
                Session(
                    key=key,
                    channel="internal",
                    chat_id=key,
                    agent_id="main",
                    owner_key=f"memory:{owner}",
                )
            )

        assert await store.sessions.owners() == ["memory:early", "memory:late"]
    finally:
        await store.close()


def test_a_migration_that_ends_inside_a_statement_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="ends inside a statement"):
        statements("CREATE TABLE half (a INTEGER;\nCREATE TABLE other (b")
