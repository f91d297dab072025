"""The intake journal: an accepted message is durable once one line is appended to this
process's journal next to the database, before SQLite holds it. Its rows go in with the
store's next transaction (even one that fails on its own work) and before any read; a
journal left by a process that died is replayed by the next open (or a live peer's
housekeeping), writing only what is missing; a live process's journal is never replayed;
``close`` stores everything and deletes the journal, or keeps it when it cannot."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import clawbot.store.intake
import clawbot.store.journal
from clawbot.app import Clawbot
from clawbot.errors import LeaseLostError, StoreError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.store.rows import JobRow, LedgerRow, message_row
from clawbot.testing import MemoryChannel

from .conftest import STORE_SESSION as SESSION
from .conftest import Chat


def _said(text: str, role: str = "user") -> TranscriptEntry:
    return TranscriptEntry(role=role, content=(TextBlock(text=text),))  # type: ignore[arg-type]


async def _accept(
    store: SqliteStore, job_id: str, text: str, *, dedup_id: str | None = None, **job: Any
) -> bool:
    """Hand ``store`` a message for an idle session, the way the scheduler does."""
    return await store.jobs.submit(
        SESSION,
        TurnJob(id=job_id, session_key=SESSION.key, **job),
        entry=_said(text),
        dedup_id=dedup_id,
    )


def _query(database: Path, sql: str) -> list[tuple[Any, ...]]:
    """What another connection (another process) finds in the database file."""
    raw = sqlite3.connect(database)
    try:
        return raw.execute(sql).fetchall()
    finally:
        raw.close()


def _texts(database: Path) -> list[str]:
    rows = _query(database, "SELECT content_json FROM messages ORDER BY id")
    return [json.loads(content)[0]["text"] for (content,) in rows]


def _jobs(database: Path) -> list[str]:
    return [job_id for (job_id,) in _query(database, "SELECT id FROM turn_jobs ORDER BY id")]


def _journals(folder: Path) -> list[Path]:
    """Every intake journal next to the database, hidden ones included."""
    return sorted(path for path in folder.iterdir() if ".intake-" in path.name)


async def _opened(database: Path, *, synchronous: str = "NORMAL") -> SqliteStore:
    store = await SqliteStore.open(database, synchronous=synchronous)
    await store.sessions.create(SESSION)
    return store


async def _restart(database: Path) -> None:
    """Open and close the database, as the next start does: it replays what it finds."""
    restarted = await SqliteStore.open(database)
    await restarted.close()


async def _crash(store: SqliteStore) -> None:
    """End ``store`` the way a killed process ends: its journal's lock goes with its file
    descriptor and nothing still pending is written. No public method dies on purpose, so
    this reaches the store's journal and connection."""
    assert store.pending._journal is not None
    store.pending._journal.release()
    store.pending._journal = None
    await store.database._conn.close()


async def test_an_accepted_message_is_in_the_journal_not_yet_in_sqlite_and_a_read_stores_it_first(
    store: SqliteStore, tmp_path: Path
) -> None:
    database = tmp_path / "clawbot.db"

    taken = await _accept(store, "turn-1", "hello there")
    (journal,) = _journals(tmp_path)
    in_journal = "hello there" in journal.read_text()
    before_read = (_texts(database), _jobs(database))
    read = [entry.text for entry in await store.transcripts.load(SESSION.key, 0)]

    assert taken is True
    assert in_journal
    assert before_read == ([], [])
    assert read == ["hello there"]
    assert (_texts(database), _jobs(database)) == (["hello there"], ["turn-1"])


async def test_a_message_accepted_before_a_crash_is_stored_with_its_job_at_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "clawbot.db"
    crashed = await _opened(database)
    lease = datetime.now(UTC) + timedelta(minutes=5)
    await _accept(
        crashed,
        "turn-1",
        "remember the milk",
        status="running",
        attempts=1,
        owner=crashed.owner,
        lease_until=lease,
    )
    owner = crashed.owner
    await _crash(crashed)
    assert _jobs(database) == []

    with caplog.at_level(logging.WARNING, logger="clawbot.store"):
        restarted = await SqliteStore.open(database)
    try:
        jobs = await restarted.jobs.open()
        transcript = [entry.text for entry in await restarted.transcripts.load(SESSION.key, 0)]
    finally:
        await restarted.close()

    assert [(job.id, job.status, job.attempts, job.owner) for job in jobs] == [
        ("turn-1", "running", 1, owner)
    ]
    assert jobs[0].lease_until == lease
    assert transcript == ["remember the milk"]
    assert "recovered 1 accepted message(s)" in caplog.text
    assert _journals(tmp_path) == []


async def test_a_message_in_any_script_accepted_before_a_crash_is_stored_as_written(
    tmp_path: Path,
) -> None:
    """The journal writes text as UTF-8, not as escapes: the replay reads it back as it was."""
    database = tmp_path / "clawbot.db"
    crashed = await _opened(database)
    said = 'naïve café, Tōkyō 東京, Ελλάδα, emoji 🚀 and a quote " and \\ and a newline\n'
    await _accept(crashed, "turn-1", said)
    await _crash(crashed)

    await _restart(database)

    assert _texts(database) == [said]


def test_an_intake_whose_turn_ended_keeps_everything_else_it_held() -> None:
    """``Intake.finished`` builds the intake field by field (quicker than ``_replace``): a
    field added to Intake must be carried there too, which this list makes one notice."""
    journal = clawbot.store.journal
    assert list(journal.Intake._fields) == [
        "ledger",
        "message",
        "job",
        "replied",
        "finish",
    ]
    intake = journal.Intake(
        ledger=LedgerRow("telegram", "1", "55", SESSION.key, "2026-11-26"),
        message=message_row(SESSION.key, 0, _said("hello")),
        job=JobRow("turn-1", SESSION.key, "main", "queued", 0, None, None, None, None, "a", "b"),
        replied=("turn-0",),
    )
    finish = journal.Finish((), "done", None, "2026-11-26")

    assert intake.finished(finish) == intake._replace(finish=finish)


def test_a_journal_line_holding_text_utf8_cannot_carry_is_written_with_escapes() -> None:
    """A lone surrogate (a broken emoji in an error message, say) is no UTF-8: that line
    goes through the json module, which escapes it, and reads back the same."""
    finish = clawbot.store.journal.Finish((), "failed", "bad \ud83d text", "2026-11-26")

    line = finish.line("turn-1")

    assert json.loads(line) == ["finish", "turn-1", [], "failed", "bad \ud83d text", "2026-11-26"]


async def test_a_journal_held_by_a_live_store_is_not_replayed_by_another_open_of_the_same_file(
    store: SqliteStore, tmp_path: Path
) -> None:
    database = tmp_path / "clawbot.db"
    await _accept(store, "turn-1", "still mine")
    journal = _journals(tmp_path)

    # flock belongs to an open file description: a second open in this very process
    # contends for the lock just as another process would.
    await _restart(database)
    after_second_open = (_texts(database), _jobs(database), _journals(tmp_path))
    await store.flush()

    assert after_second_open == ([], [], journal)
    assert (_texts(database), _jobs(database)) == (["still mine"], ["turn-1"])


async def test_replaying_a_journal_writes_only_the_intakes_the_database_lacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "clawbot.db"
    crashed = await _opened(database)
    await _accept(crashed, "turn-1", "stored already")
    await crashed.flush()
    await _accept(crashed, "turn-2", "only in the journal")
    (journal,) = _journals(tmp_path)
    assert len(journal.read_bytes().splitlines()) == 2  # the stored one is still listed
    await _crash(crashed)

    with caplog.at_level(logging.WARNING, logger="clawbot.store"):
        await _restart(database)

    assert _texts(database) == ["stored already", "only in the journal"]
    assert _jobs(database) == ["turn-1", "turn-2"]
    assert "recovered 1 accepted message(s)" in caplog.text


async def test_a_live_peers_housekeeping_stores_what_a_dead_process_left_in_its_journal(
    bot: Clawbot, settings: Settings
) -> None:
    database = settings.db_path
    crashed = await _opened(database)
    await _accept(crashed, "turn-1", "sent just before the crash")
    await _crash(crashed)

    await bot.scheduler.tick()

    assert (_texts(database), _jobs(database)) == (["sent just before the crash"], ["turn-1"])
    assert _journals(database.parent) == []


async def test_a_journal_next_to_a_database_whose_name_has_glob_characters_is_replayed(
    tmp_path: Path,
) -> None:
    database = tmp_path / "bot[1].db"
    crashed = await _opened(database)
    await _accept(crashed, "turn-1", "not lost")
    await _crash(crashed)

    await _restart(database)

    assert (_texts(database), _jobs(database)) == (["not lost"], ["turn-1"])
    assert _journals(tmp_path) == []


async def test_a_torn_last_line_is_skipped_with_a_warning_and_the_intakes_before_it_are_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "clawbot.db"
    crashed = await _opened(database)
    await _accept(crashed, "turn-1", "written whole")
    await _accept(crashed, "turn-2", "cut off by a power cut")
    await _crash(crashed)
    (journal,) = _journals(tmp_path)
    first, second = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(first + second[: len(second) // 2])

    with caplog.at_level(logging.WARNING):
        await _restart(database)

    assert _texts(database) == ["written whole"]
    assert _jobs(database) == ["turn-1"]
    assert "skipped a torn record (line 2)" in caplog.text
    assert _journals(tmp_path) == []


async def test_a_redelivery_of_a_message_still_only_in_the_journal_is_dropped(
    store: SqliteStore, tmp_path: Path
) -> None:
    database = tmp_path / "clawbot.db"

    first = await _accept(store, "turn-1", "hi", dedup_id="m1")
    assert _query(database, "SELECT message_id FROM inbound_seen") == []  # journal only
    again = await _accept(store, "turn-2", "hi", dedup_id="m1")
    await store.flush()

    assert (first, again) == (True, False)
    assert _texts(database) == ["hi"]
    assert _jobs(database) == ["turn-1"]
    assert _query(database, "SELECT message_id FROM inbound_seen") == [("m1",)]


async def test_a_transaction_whose_work_fails_still_stores_the_journalled_messages(
    store: SqliteStore, tmp_path: Path
) -> None:
    database = tmp_path / "clawbot.db"
    await _accept(store, "turn-1", "keep me")

    def failing(db: sqlite3.Connection) -> None:
        db.execute("UPDATE sessions SET agent_id = 'changed'")
        raise ValueError("the work itself is wrong")

    with pytest.raises(ValueError):
        await store.transaction(failing)

    # Read with another connection: a read through the store would flush by itself.
    assert (_texts(database), _jobs(database)) == (["keep me"], ["turn-1"])
    assert _query(database, "SELECT agent_id FROM sessions") == [("main",)]


async def test_a_finish_fenced_off_by_another_owner_still_stores_the_journalled_messages(
    store: SqliteStore, tmp_path: Path
) -> None:
    database = tmp_path / "clawbot.db"
    await _accept(store, "turn-1", "first", status="running", owner=store.owner)
    await store.flush()
    await store.transaction(
        lambda db: db.execute("UPDATE turn_jobs SET owner = 'elsewhere' WHERE id = 'turn-1'")
    )
    await _accept(store, "turn-2", "second")

    with pytest.raises(LeaseLostError):
        await store.jobs.finish(SESSION, "turn-1", [_said("stale answer", "assistant")])

    # Read with another connection: a read through the store would flush by itself.
    assert _texts(database) == ["first", "second"]
    assert _jobs(database) == ["turn-1", "turn-2"]
    assert _query(database, "SELECT owner, status FROM turn_jobs WHERE id = 'turn-1'") == [
        ("elsewhere", "running")
    ]


async def test_close_stores_the_journalled_messages_and_deletes_the_journal(
    tmp_path: Path,
) -> None:
    database = tmp_path / "clawbot.db"
    store = await _opened(database)
    await _accept(store, "turn-1", "last words")
    assert len(_journals(tmp_path)) == 1

    await store.close()

    assert (_texts(database), _jobs(database)) == (["last words"], ["turn-1"])
    assert _journals(tmp_path) == []


async def test_a_journal_that_could_not_be_stored_at_close_is_kept_and_replayed_at_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "clawbot.db"
    store = await _opened(database)
    await _accept(store, "turn-1", "not lost")
    # This connection can no longer write, as with a read-only file or a full disk (no
    # public way to cause that, and root ignores file modes, so it reaches the connection).
    store.database._conn._conn.execute("PRAGMA query_only=ON")

    with caplog.at_level(logging.WARNING, logger="clawbot.store"):
        await store.close()
    kept = _journals(tmp_path)
    before_restart = _texts(database)
    await _restart(database)

    assert len(kept) == 1
    assert "kept accepted messages" in caplog.text
    assert before_restart == []
    assert (_texts(database), _jobs(database)) == (["not lost"], ["turn-1"])
    assert _journals(tmp_path) == []


async def test_after_a_write_fails_on_the_database_a_message_is_refused_up_front_not_journalled(
    store: SqliteStore, tmp_path: Path
) -> None:
    # The database can no longer be written (reaching the connection, as above).
    store.database._conn._conn.execute("PRAGMA query_only=ON")
    with pytest.raises(StoreError):
        await store.transcripts.append(SESSION, [_said("fails")])

    with pytest.raises(StoreError):
        await _accept(store, "turn-1", "would be lost")

    assert _journals(tmp_path) == []


async def test_a_journal_whose_intakes_are_all_stored_starts_over_once_it_reaches_the_reset_size(
    store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _accept(store, "turn-1", "one")
    (journal,) = _journals(tmp_path)
    one_line = journal.stat().st_size
    monkeypatch.setattr(clawbot.store.journal, "RESET_AT", one_line + 1)

    await store.flush()
    below_the_size = journal.stat().st_size
    await _accept(store, "turn-2", "two")
    await store.flush()
    reached_it = journal.stat().st_size
    await _accept(store, "turn-3", "three")

    assert below_the_size == one_line
    assert reached_it == 0
    (only_line,) = journal.read_text().splitlines()
    assert "three" in only_line


@pytest.mark.parametrize(("synchronous", "journal_fsyncs"), [("FULL", 1), ("NORMAL", 0)])
async def test_an_append_to_the_journal_is_fsynced_under_full_synchronous_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synchronous: str, journal_fsyncs: int
) -> None:
    store = await _opened(tmp_path / "clawbot.db", synchronous=synchronous)
    synced: list[int] = []
    fsync: Callable[[int], None] = os.fsync

    def counting(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        fsync(fd)

    try:
        with monkeypatch.context() as patched:
            patched.setattr(os, "fsync", counting)  # the module clawbot.store.journal calls
            await _accept(store, "turn-1", "hi")
        (journal,) = _journals(tmp_path)
        inode = journal.stat().st_ino
    finally:
        await store.close()

    assert synced.count(inode) == journal_fsyncs


async def _answer(store: SqliteStore, job_id: str, text: str) -> None:
    await store.jobs.finish(SESSION, job_id, [_said(text, "assistant")])


async def test_a_turn_ended_while_only_in_the_journal_is_stored_as_it_ended_after_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "clawbot.db"
    store = await _opened(database)
    await _accept(store, "turn-1", "what is two and two", status="running", owner=store.owner)
    await _answer(store, "turn-1", "four")
    in_sqlite = (_texts(database), _jobs(database))
    await _crash(store)

    with caplog.at_level(logging.WARNING, logger="clawbot.store"):
        reopened = await SqliteStore.open(database)
    try:
        transcript = [e.text for e in await reopened.transcripts.load(SESSION.key, 0)]
        job = await reopened.jobs.get("turn-1")
        answer = await reopened.jobs.reply_text("turn-1")
        unsent = [j.id for j in await reopened.jobs.unreplied()]
    finally:
        await reopened.close()

    assert in_sqlite == ([], [])  # the answer went out with both only in the journal
    assert transcript == ["what is two and two", "four"]
    assert job is not None and job.status == "done"
    assert answer == "four"
    assert unsent == ["turn-1"]  # its reply may not have gone out: sent again at start-up
    assert "recovered 1 accepted message(s), 1 answered" in caplog.text


async def test_journalled_turns_reach_the_database_together_once_enough_have_ended(
    store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clawbot.store.intake, "WRITE_BEHIND_TURNS", 3)
    database = tmp_path / "clawbot.db"
    seen: list[list[str]] = []
    for number in (1, 2, 3):
        await _accept(store, f"turn-{number}", f"question {number}", status="running")
        await _answer(store, f"turn-{number}", f"answer {number}")
        seen.append(_jobs(database))

    assert seen == [[], [], ["turn-1", "turn-2", "turn-3"]]
    assert _query(database, "SELECT DISTINCT status FROM turn_jobs") == [("done",)]
    assert _texts(database) == [
        f"{kind} {number}" for number in (1, 2, 3) for kind in ("question", "answer")
    ]


async def test_a_journalled_turn_reaches_the_database_shortly_after_it_ended(
    store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clawbot.store.intake, "WRITE_BEHIND_SECONDS", 0)
    database = tmp_path / "clawbot.db"
    await _accept(store, "turn-1", "anyone there?", status="running")
    await _answer(store, "turn-1", "yes")
    right_after = _jobs(database)

    for _ in range(100):  # the write-behind timer, then its task: a few passes of the loop
        if _jobs(database):
            break
        await asyncio.sleep(0)

    assert right_after == []
    assert _jobs(database) == ["turn-1"]
    assert _texts(database) == ["anyone there?", "yes"]


async def test_a_turn_whose_message_reached_the_database_already_ends_in_a_transaction(
    store: SqliteStore, tmp_path: Path
) -> None:
    database = tmp_path / "clawbot.db"
    await _accept(store, "turn-1", "hello", status="running", owner=store.owner)
    await store.flush()  # as a read or another write would

    await _answer(store, "turn-1", "hi")

    assert _query(database, "SELECT status FROM turn_jobs") == [("done",)]
    assert _texts(database) == ["hello", "hi"]


async def test_a_journal_that_cannot_be_written_leaves_every_message_to_a_transaction(
    bot: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def full(self: clawbot.store.journal.IntakeJournal, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    await chat.say("before")  # journalled, as usual
    monkeypatch.setattr(clawbot.store.journal.IntakeJournal, "append", full)
    with caplog.at_level(logging.WARNING, logger="clawbot.store"):
        first = await chat.say("during")
        second = await chat.say("after")

    assert [first.kind, second.kind] == ["turn", "turn"]
    assert channel.texts == ["ok", "ok", "ok"]
    database = bot.settings.db_path
    assert _texts(database) == ["before", "ok", "during", "ok", "after", "ok"]
    assert caplog.text.count("cannot write the intake journal") == 1


async def test_a_reply_noted_as_sent_is_not_sent_again_after_a_crash(tmp_path: Path) -> None:
    database = tmp_path / "clawbot.db"
    store = await _opened(database)
    await _accept(store, "turn-1", "what is two and two", status="running", owner=store.owner)
    await _answer(store, "turn-1", "four")
    store.note_replied("turn-1")  # the reply went out; its mark is not in SQLite yet
    await _crash(store)

    reopened = await SqliteStore.open(database)
    try:
        unsent = [j.id for j in await reopened.jobs.unreplied()]
        job = await reopened.jobs.get("turn-1")
    finally:
        await reopened.close()

    assert unsent == []
    assert job is not None and job.status == "done"


async def test_a_reply_noted_after_its_turn_reached_sqlite_is_not_sent_again_after_a_crash(
    tmp_path: Path,
) -> None:
    database = tmp_path / "clawbot.db"
    store = await _opened(database)
    await _accept(store, "turn-1", "what is two and two", status="running", owner=store.owner)
    await _answer(store, "turn-1", "four")
    await store.flush()  # the turn is in SQLite, unreplied; only the note follows
    store.note_replied("turn-1")
    await _crash(store)

    reopened = await SqliteStore.open(database)
    try:
        unsent = [j.id for j in await reopened.jobs.unreplied()]
    finally:
        await reopened.close()

    assert unsent == []


async def test_a_journalled_turn_a_later_message_marks_replied_is_stored_marked_without_an_update(
    tmp_path: Path,
) -> None:
    database = tmp_path / "clawbot.db"
    store = await _opened(database)
    statements: list[str] = []
    store.database._conn._conn.set_trace_callback(statements.append)
    await _accept(store, "turn-1", "what is two and two", status="running", owner=store.owner)
    await _answer(store, "turn-1", "four")
    await store.jobs.submit(  # the next message carries the mark of turn-1's sent reply
        SESSION,
        TurnJob(id="turn-2", session_key=SESSION.key, status="running", owner=store.owner),
        entry=_said("and three and three"),
        replied=["turn-1"],
    )
    await store.flush()
    try:
        unsent = [j.id for j in await store.jobs.unreplied()]
        open_jobs = [j.id for j in await store.jobs.open()]
    finally:
        await store.close()

    assert unsent == []
    assert open_jobs == ["turn-2"]
    assert not [sql for sql in statements if sql.startswith("UPDATE turn_jobs SET replied")]
