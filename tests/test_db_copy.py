"""``clawbot db copy``: a bot moves from SQLite to PostgreSQL (and back) whole, its rows
counted on both sides, and never into a database that holds anything."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner, Result

from clawbot.cli.main import app
from clawbot.memory.records import MemoryQuery
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.jobs import TurnJob
from clawbot.store import SqliteStore, Store, new_id
from clawbot.store.backend import open_url

from .postgres_server import PostgresServer

PARENT = Session(key="telegram:1", channel="telegram", chat_id="1", agent_id="main")
CHILD = Session(
    key="internal:telegram:1/research",
    channel="internal",
    chat_id="telegram:1/research",
    agent_id="worker",
    deliver=False,
    owner_key=PARENT.key,
)


def said(role: str, text: str, turn_id: str) -> TranscriptEntry:
    return TranscriptEntry(role=role, content=(TextBlock(text=text),), turn_id=turn_id)  # type: ignore[arg-type]


async def clawbot(*args: str) -> Result:
    """The ``clawbot`` command, on a thread of its own (it runs its own event loop)."""
    runner = CliRunner()
    return await asyncio.to_thread(lambda: runner.invoke(app, list(args)))


async def a_bot(path: Path) -> None:
    """A bot's database: a chat with a finished turn, a child session, a memory, an
    approved sender."""
    store = await SqliteStore.open(path)
    try:
        await store.sessions.create(PARENT)
        await store.sessions.create(CHILD)
        job = TurnJob(id=new_id("turn"), session_key=PARENT.key, status="running", attempts=1)
        await store.jobs.submit(PARENT, job, entry=said("user", "hi", job.id), dedup_id="7")
        await store.jobs.finish(PARENT, job.id, [said("assistant", "Hello!", job.id)])
        await store.memories.put(
            namespace="main",
            key="colour",
            text="The user likes blue",
            tags=("prefs",),
            session_key=PARENT.key,
            agent_id="main",
        )
        now = datetime.now(UTC)
        request = await store.pairing.request(
            channel="telegram",
            sender_id="1",
            sender_name="Ann",
            chat_id="1",
            now=now,
            expires_at=now + timedelta(hours=1),
            max_pending=3,
            new_code=lambda: "XYZ789",
        )
        assert request is not None
        await store.pairing.decide("telegram", "XYZ789", approve=True, now=now)
    finally:
        await store.close()


async def what_it_holds(store: Store) -> tuple[object, ...]:
    hits = await store.memories.search(
        MemoryQuery(text="blue", session_key=PARENT.key, agent_id="main", namespaces=None)
    )
    return (
        [(e.role, e.text) for e in await store.transcripts.load(PARENT.key, 0)],
        await store.sessions.child_keys(PARENT.key),
        [(job.status, job.lane) for job in await store.jobs.for_session(PARENT.key)],
        [hit.memory.ref for hit in hits],
        await store.access.is_approved_sender("telegram", "1"),
    )


async def test_a_bot_copied_to_postgresql_holds_the_same_and_the_counts_are_verified(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    source = tmp_path / "clawbot.db"
    await a_bot(source)
    target = postgres_server.new_database()

    result = await clawbot("db", "copy", "--from", f"sqlite://{source}", "--to", target)

    assert result.exit_code == 0, result.output
    assert "copied and verified: sessions 2, messages 2, turn_jobs 1, inbound_seen 1" in (
        result.output
    )
    copied, original = await open_url(target), await open_url(f"sqlite://{source}")
    try:
        assert await what_it_holds(copied) == await what_it_holds(original)
        assert (await what_it_holds(copied))[0] == [("user", "hi"), ("assistant", "Hello!")]
    finally:
        await copied.close()
        await original.close()


async def test_a_copy_into_a_database_that_holds_anything_is_refused(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    source = tmp_path / "clawbot.db"
    await a_bot(source)
    target = postgres_server.new_database()
    await clawbot("db", "copy", "--from", f"sqlite://{source}", "--to", target)

    again = await clawbot("db", "copy", "--from", f"sqlite://{source}", "--to", target)

    assert again.exit_code == 1
    assert "already holds rows (sessions 2" in again.output
    store = await open_url(target)
    try:
        assert await store.transcripts.count(PARENT.key) == 2  # nothing written twice
    finally:
        await store.close()


async def test_a_round_trip_back_to_sqlite_keeps_everything_and_new_rows_get_new_ids(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    source = tmp_path / "clawbot.db"
    await a_bot(source)
    middle = postgres_server.new_database()
    back = tmp_path / "back.db"
    await clawbot("db", "copy", "--from", f"sqlite://{source}", "--to", middle)

    result = await clawbot("db", "copy", "--from", middle, "--to", f"sqlite://{back}")

    assert result.exit_code == 0, result.output
    returned, original = await open_url(f"sqlite://{back}"), await open_url(f"sqlite://{source}")
    on_postgres = await open_url(middle)
    try:
        assert await what_it_holds(returned) == await what_it_holds(original)
        # PostgreSQL's ids continue after the copied ones: a new message is stored
        await on_postgres.transcripts.append(PARENT, [said("user", "again", "t2")])
        assert await on_postgres.transcripts.count(PARENT.key) == 3
    finally:
        for store in (returned, original, on_postgres):
            await store.close()
