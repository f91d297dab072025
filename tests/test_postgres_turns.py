"""A message's intake and its turn's end on PostgreSQL are one round trip each, COMMIT
included (clawbot/store/postgres/turns.py), and keep the shared code's promises: a
redelivery writes nothing, a turn another process took over writes nothing and raises.
Round trips are counted in libpq's trace, as tests/test_postgres_batching.py does."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import pq
from pydantic import SecretStr

from clawbot.app import Clawbot
from clawbot.errors import LeaseLostError
from clawbot.settings import Settings
from clawbot.store.postgres.store import PostgresStore
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import STORE_SESSION
from .postgres_server import PostgresServer
from .test_postgres_batching import libpq_trace, queries_sent
from .test_store_backends import running, said

SESSION = STORE_SESSION


@pytest.fixture
async def url(postgres_server: PostgresServer) -> str:
    return postgres_server.new_database(migrated=True)


@pytest.fixture
async def store(url: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(url)
    await opened.sessions.create(SESSION)
    yield opened
    await opened.close()


@pytest.fixture
async def other(url: str, store: PostgresStore) -> AsyncIterator[PostgresStore]:
    """A second process's store on the same database."""
    opened = await PostgresStore.open(url)
    yield opened
    await opened.close()


def one_round_trip_with_its_commit(sent: list[str], store: PostgresStore) -> bool:
    """One round trip (libpq's pipeline: BEGIN, the statement, COMMIT, one Sync), after
    which the connection is in no transaction: it committed."""
    idle = store.database._conn.pgconn.transaction_status == pq.TransactionStatus.IDLE
    return sent == ["(extended)"] and idle


async def test_a_messages_intake_is_one_round_trip_with_its_commit(store: PostgresStore) -> None:
    job = running(store.owner)

    with queries_sent(store.database) as sent:
        taken = await store.jobs.submit(
            SESSION, job, entry=said("user", "hi", job.id), dedup_id="m1"
        )

    assert taken
    assert one_round_trip_with_its_commit(sent, store)
    assert [entry.text for entry in await store.transcripts.load(SESSION.key, 0)] == ["hi"]
    summary = await store.jobs.get(job.id)
    assert summary is not None and summary.status == "running"


async def test_a_redelivery_to_another_process_is_one_round_trip_and_writes_nothing(
    store: PostgresStore, other: PostgresStore
) -> None:
    first = running(store.owner)
    await store.jobs.submit(SESSION, first, entry=said("user", "hi", first.id), dedup_id="m1")
    again = running(other.owner)
    earlier = running(store.owner)  # a reply mark riding on the redelivery: not written
    await store.jobs.submit(SESSION, earlier, entry=said("user", "before", earlier.id))

    with queries_sent(other.database) as sent:
        taken = await other.jobs.submit(
            SESSION, again, entry=said("user", "hi", again.id), dedup_id="m1", replied=[earlier.id]
        )

    assert not taken
    assert one_round_trip_with_its_commit(sent, other)
    assert await store.transcripts.count(SESSION.key) == 2
    assert await store.jobs.get(again.id) is None
    assert [job.id for job in await store.jobs.unreplied()] == []
    assert {job.id for job in await store.jobs.open()} == {first.id, earlier.id}


async def test_a_new_messages_reply_marks_ride_on_its_intake(store: PostgresStore) -> None:
    earlier = running(store.owner)
    await store.jobs.submit(SESSION, earlier, entry=said("user", "before", earlier.id))
    await store.jobs.finish(SESSION, earlier.id, [said("assistant", "done", earlier.id)])
    assert [job.id for job in await store.jobs.unreplied()] == [earlier.id]
    job = running(store.owner)

    with queries_sent(store.database) as sent:
        await store.jobs.submit(
            SESSION, job, entry=said("user", "hi", job.id), replied=[earlier.id]
        )

    assert one_round_trip_with_its_commit(sent, store)
    assert await store.jobs.unreplied() == []


async def test_a_turns_end_is_one_round_trip_with_its_commit(store: PostgresStore) -> None:
    job = running(store.owner)
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))
    answer = [said("assistant", "thinking", job.id), said("assistant", "Hello!", job.id)]

    with queries_sent(store.database) as sent:
        await store.jobs.finish(SESSION, job.id, answer)

    assert one_round_trip_with_its_commit(sent, store)
    assert await store.jobs.reply_text(job.id) == "Hello!"
    summary = await store.jobs.get(job.id)
    assert summary is not None and summary.status == "done"


async def test_a_turn_taken_over_by_another_process_ends_in_one_round_trip_writing_nothing(
    store: PostgresStore,
) -> None:
    job = running("elsewhere:1")
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))

    with queries_sent(store.database) as sent, pytest.raises(LeaseLostError, match="elsewhere:1"):
        await store.jobs.finish(SESSION, job.id, [said("assistant", "late", job.id)])

    assert one_round_trip_with_its_commit(sent, store)
    assert await store.transcripts.count(SESSION.key) == 1
    summary = await store.jobs.get(job.id)
    assert summary is not None and summary.status == "running"


async def test_a_take_over_committed_while_the_turn_ends_fences_it_out(
    store: PostgresStore, url: str
) -> None:
    """The fence holds the job's row from its check to the commit: a finish that meets
    another process's uncommitted take-over waits for it and then writes nothing."""
    job = running(store.owner)
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))
    with psycopg.connect(url) as taker:
        taker.execute("UPDATE turn_jobs SET owner = 'elsewhere:2' WHERE id = %s", (job.id,))
        finishing = asyncio.ensure_future(
            store.jobs.finish(SESSION, job.id, [said("assistant", "late", job.id)])
        )
        waiting = store.database._conn.pgconn.backend_pid  # the store's one connection
        with psycopg.connect(url, autocommit=True) as watcher:
            async with asyncio.timeout(30):  # the finish waits for the take-over's lock
                while not watcher.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
                    (waiting,),
                ).fetchone():
                    await asyncio.sleep(0.01)
        assert not finishing.done()
        taker.commit()

        with pytest.raises(LeaseLostError, match="elsewhere:2"):
            await finishing

    assert await store.transcripts.count(SESSION.key) == 1
    summary = await store.jobs.get(job.id)
    assert summary is not None and summary.status == "running"


async def test_claiming_a_session_nobody_owns_yet_is_one_round_trip(
    store: PostgresStore,
) -> None:
    with queries_sent(store.database) as sent:
        claim = await store.owners.claim("m:new")

    assert claim.mine and claim.owner == store.owner
    assert len(sent) == 1


async def test_a_session_a_dead_process_owned_is_taken_over_by_the_next_claim(
    store: PostgresStore, other: PostgresStore
) -> None:
    await other.owners.claim("m:left")  # its process never said it was alive

    claim = await store.owners.claim("m:left")
    with queries_sent(store.database) as sent:
        again = await store.owners.claim("m:left")

    assert claim.mine and claim.taken_from == other.owner
    assert again.mine and again.taken_from is None
    assert len(sent) == 1  # its own session: one round trip


async def test_a_turns_end_is_planned_once_and_then_only_bound(store: PostgresStore) -> None:
    """The statement is prepared on the connection at its first use: later turns send its
    values only (planning it took longer than running it)."""
    parsed = []
    for text in ("first", "second"):
        job = running(store.owner)
        await store.jobs.submit(SESSION, job, entry=said("user", text, job.id))
        with prepared_on(store) as names:
            await store.jobs.finish(SESSION, job.id, [said("assistant", text, job.id)])
        parsed.append(names)

    assert len(parsed[0]) == 1 and parsed[1] == []
    assert await store.transcripts.count(SESSION.key) == 4


@contextmanager
def prepared_on(store: PostgresStore) -> Iterator[list[str]]:
    """The names of the statements prepared on the store's connection inside the block
    (the Parse messages of libpq's trace that name one)."""
    names: list[str] = []
    try:
        with libpq_trace(store.database._conn) as trace:
            yield names
    finally:
        names += re.findall(r'\tF\t\d+\tParse\t "(clawbot_\d+)"', "".join(trace))


async def test_what_the_model_sees_of_a_transcript_is_one_read(store: PostgresStore) -> None:
    job = running(store.owner)
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))
    await store.jobs.finish(SESSION, job.id, [said("assistant", "Hello!", job.id)])

    with queries_sent(store.database) as sent:
        live = await store.transcripts.live(SESSION.key, SESSION.epoch, limit=10)
    empty = await store.transcripts.live("m:nobody", 0)

    assert len(sent) == 1
    assert live.summary is None and [entry.entry.text for entry in live.entries] == ["hi", "Hello!"]
    assert empty.summary is None and empty.entries == ()


async def test_opening_a_new_chats_session_is_one_round_trip(store: PostgresStore) -> None:
    chat = SESSION.with_changes(key="m:new", chat_id="new")
    with queries_sent(store.database) as sent:
        opened = await store.sessions.open(chat)
    with queries_sent(store.database) as again:
        reopened = await store.sessions.open(chat)

    assert opened.created and not reopened.created
    assert reopened.session == chat
    assert len(sent) == 1 and len(again) == 1


async def test_a_session_another_process_creates_meanwhile_is_opened_as_it_stored_it(
    store: PostgresStore, url: str
) -> None:
    """Its insert waits for the other's, which commits after this statement's snapshot
    was taken: the statement sees neither row, and the session is read once more."""
    chat = SESSION.with_changes(key="m:raced", chat_id="raced")
    theirs = chat.with_changes(agent_id="theirs")
    with psycopg.connect(url) as conn:  # a transaction, left open: the other process
        conn.execute(
            "INSERT INTO sessions (key, channel, chat_id, agent_id, deliver, epoch, meta_json,"
            " created_at, updated_at) VALUES (%s, 'm', 'raced', 'theirs', 1, 0, '{}', '', '')",
            (chat.key,),
        )
        opening = asyncio.ensure_future(store.sessions.open(chat))
        await waits_for_a_lock(url)
        conn.commit()
        opened = await opening

    assert not opened.created and opened.session == theirs


async def waits_for_a_lock(url: str) -> None:
    """Until a statement on ``url``'s database waits for another transaction's lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()[0]:  # type: ignore[index]
            await asyncio.sleep(0.01)  # polls the server: no signal to wait on


async def test_a_new_chats_first_message_waits_for_the_server_four_times(
    tmp_path: Path, url: str, scripted: ScriptedModel
) -> None:
    """Its session opened, claimed by this process, the message taken in, the turn ended:
    the empty transcript of a session made just now is not read back."""
    settings = Settings(
        home=tmp_path,
        model=scripted.model_string,
        database_url=SecretStr(url),
        _env_file=None,  # type: ignore[call-arg]
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        store = bot.store
        assert isinstance(store, PostgresStore)
        await bot.router.handle(channel.message("hi", chat_id="earlier"))  # the bot started
        with queries_sent(store.database) as sent:
            await bot.router.handle(channel.message("hello", chat_id="new"))

    assert channel.texts == ["ok", "ok"]
    assert len(sent) == 4
