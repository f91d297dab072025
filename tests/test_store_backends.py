"""The store's behaviour through its interface, on each backend: every test here runs on
SQLite and on PostgreSQL (the ``each_store`` fixture), so the two keep the same promises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from clawbot.errors import LeaseLostError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.usage import UsageFilter, UsageRecord
from clawbot.schedules.records import ScheduledTask
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.store import Store, new_id
from clawbot.store.migrations import migrations
from clawbot.store.postgres.migrate import known as postgres_migrations
from clawbot.store.postgres.store import PostgresStore
from clawbot.store.records import NewCompaction

from .conftest import STORE_SESSION

SESSION = STORE_SESSION


@pytest.fixture
def store(each_store: Store) -> Store:
    return each_store


def said(role: str, text: str, turn_id: str | None = None) -> TranscriptEntry:
    return TranscriptEntry(role=role, content=(TextBlock(text=text),), turn_id=turn_id)  # type: ignore[arg-type]


def running(owner: str | None = None) -> TurnJob:
    soon = datetime.now(UTC) + timedelta(minutes=5)
    return TurnJob(
        id=new_id("turn"),
        session_key=SESSION.key,
        status="running",
        attempts=1,
        owner=owner,
        lease_until=soon if owner else None,
    )


async def test_a_new_database_is_at_its_backends_latest_migration(store: Store) -> None:
    known = postgres_migrations() if isinstance(store, PostgresStore) else migrations()

    assert await store.schema_version() == known[-1].number


def test_postgresqls_migrations_are_numbered_and_named_like_sqlites() -> None:
    sqlite = [(migration.number, migration.name) for migration in migrations()]
    postgres = [(migration.number, migration.name) for migration in postgres_migrations()]

    assert postgres == sqlite


async def test_a_finished_turn_is_stored_with_its_answer(store: Store) -> None:
    job = running()
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))
    await store.jobs.finish(SESSION, job.id, [said("assistant", "Hello!", job.id)])

    transcript = await store.transcripts.load(SESSION.key, SESSION.epoch)
    summary = await store.jobs.get(job.id)
    assert [(entry.role, entry.text) for entry in transcript] == [
        ("user", "hi"),
        ("assistant", "Hello!"),
    ]
    assert summary is not None and summary.status == "done"
    assert await store.jobs.reply_text(job.id) == "Hello!"


async def test_a_redelivered_platform_message_is_stored_once(store: Store) -> None:
    first, again = running(), running()

    taken = await store.jobs.submit(SESSION, first, entry=said("user", "hi"), dedup_id="m1")
    retaken = await store.jobs.submit(SESSION, again, entry=said("user", "hi"), dedup_id="m1")

    assert (taken, retaken) == (True, False)
    assert await store.transcripts.count(SESSION.key) == 1
    assert [job.id for job in await store.jobs.for_session(SESSION.key)] == [first.id]


async def test_an_open_turn_and_an_unsent_reply_are_found_for_recovery(store: Store) -> None:
    job = running()
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))
    assert [found.id for found in await store.jobs.open()] == [job.id]

    await store.jobs.finish(SESSION, job.id, [said("assistant", "Hello!", job.id)])
    assert await store.jobs.open() == []
    await store.flush()
    assert [found.id for found in await store.jobs.unreplied()] == []  # no owner: not a reply

    await store.jobs.mark_replied([job.id])
    assert await store.jobs.unreplied() == []


async def test_a_job_is_claimed_only_as_it_was_seen_so_two_claims_never_both_win(
    store: Store,
) -> None:
    job = running(owner=store.owner)
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))
    await store.flush()
    taken = await store.jobs.claim(
        job._replace(owner="elsewhere:1"), datetime.now(UTC) + timedelta(minutes=5)
    )
    assert not taken  # a stale view of its owner: the claim changes nothing

    await store.jobs.requeue(SESSION, job.id)
    queued = job._replace(status="queued", owner=None, lease_until=None)
    lease = datetime.now(UTC) + timedelta(minutes=5)
    assert await store.jobs.claim(queued, lease)
    assert not await store.jobs.claim(queued, lease)


async def test_a_finish_fenced_out_by_a_new_owner_raises_and_stores_nothing(
    store: Store,
) -> None:
    job = running(owner="elsewhere:1")
    await store.jobs.submit(SESSION, job, entry=said("user", "hi", job.id))
    await store.flush()  # in the database, where another process could take it over

    with pytest.raises(LeaseLostError):
        await store.jobs.finish(SESSION, job.id, [said("assistant", "late", job.id)])
    assert await store.transcripts.count(SESSION.key) == 1


async def test_a_message_for_a_busy_session_waits_in_its_backlog(store: Store) -> None:
    job = TurnJob(id=new_id("turn"), session_key=SESSION.key)
    item = BacklogItem(kind="message", job_id=job.id, entry=said("user", "later"))
    await store.jobs.submit(SESSION, job, item=item)

    items = await store.backlog.items(SESSION.key)
    assert [(stored.item.job_id, stored.item.text) for stored in items] == [(job.id, "later")]
    assert await store.transcripts.count(SESSION.key) == 0


async def test_a_compaction_replaces_what_it_summarized_in_what_the_model_sees(
    store: Store,
) -> None:
    await store.transcripts.append(SESSION, [said("user", f"note {n}") for n in range(3)])
    live = await store.transcripts.live(SESSION.key, SESSION.epoch)
    through = live.entries[1].id

    marked = await store.transcripts.compact(
        SESSION.key,
        SESSION.epoch,
        NewCompaction(summary="two notes", through_id=through, trigger="manual", model="m"),
    )

    after = await store.transcripts.live(SESSION.key, SESSION.epoch)
    assert marked == 2
    assert after.summary == "two notes"
    assert [entry.entry.text for entry in after.entries] == ["note 2"]
    assert len(await store.transcripts.load(SESSION.key, SESSION.epoch)) == 3


async def test_a_sessions_children_are_listed_oldest_first(store: Store) -> None:
    for name in ("first", "second"):
        await store.sessions.create(
            Session(
                key=f"internal:{SESSION.key}/{name}",
                channel="internal",
                chat_id=f"{SESSION.key}/{name}",
                agent_id="worker",
                deliver=False,
                owner_key=SESSION.key,
            )
        )

    children = await store.sessions.child_keys(SESSION.key)
    assert children == [f"internal:{SESSION.key}/first", f"internal:{SESSION.key}/second"]
    assert await store.sessions.owners() == [SESSION.key]


async def test_opening_a_new_chats_session_creates_it_once(store: Store) -> None:
    chat = Session(key="m:new-chat", channel="m", chat_id="new-chat", agent_id="main")

    first = await store.sessions.open(chat)
    again = await store.sessions.open(chat.with_changes(agent_id="other"))

    assert first.created and first.session == chat
    assert not again.created and again.session == chat  # what is stored, not what was asked
    assert await store.sessions.get(chat.key) == chat


async def test_opening_a_stored_session_gives_what_is_stored(store: Store) -> None:
    await store.sessions.save(SESSION.with_changes(agent_id="writer", meta={"k": "v"}))

    opened = await store.sessions.open(SESSION)

    assert not opened.created
    assert opened.session == SESSION.with_changes(agent_id="writer", meta={"k": "v"})


async def test_an_approved_pairing_code_approves_its_sender_once(store: Store) -> None:
    now = datetime.now(UTC)
    request = await store.pairing.request(
        channel="telegram",
        sender_id="42",
        sender_name="Ann",
        chat_id="42",
        now=now,
        expires_at=now + timedelta(hours=1),
        max_pending=3,
        new_code=lambda: "ABC123",
    )
    assert request is not None

    assert await store.pairing.decide("telegram", request.code, approve=True, now=now)
    assert not await store.pairing.decide("telegram", request.code, approve=True, now=now)
    assert await store.access.is_approved_sender("telegram", "42")


async def test_a_full_pairing_queue_refuses_another_sender(store: Store) -> None:
    now = datetime.now(UTC)
    codes = iter(["A1", "B2"])
    asked = [
        await store.pairing.request(
            channel="telegram",
            sender_id=sender,
            sender_name=sender,
            chat_id=sender,
            now=now,
            expires_at=now + timedelta(hours=1),
            max_pending=1,
            new_code=lambda: next(codes),
        )
        for sender in ("1", "2")
    ]

    assert asked[0] is not None and asked[1] is None


async def test_the_usage_ledger_adds_up_its_rows_and_keeps_unknown_costs_unknown(
    store: Store,
) -> None:
    at = datetime(2030, 1, 1, 12, tzinfo=UTC)
    store.usage.record(
        UsageRecord(at=at, purpose="turn", model="openai/a", provider="openai", latency_ms=5,
                    root_key=SESSION.key, input_tokens=100, output_tokens=20, cost_nanousd=3000)
    )  # fmt: skip
    store.usage.record(
        UsageRecord(at=at, purpose="turn", model="other/b", provider="other", latency_ms=5,
                    root_key=SESSION.key, input_tokens=50, output_tokens=5)
    )  # fmt: skip
    store.usage.record(
        UsageRecord(at=at, purpose="compaction", model="openai/a", provider="openai",
                    latency_ms=1, root_key=SESSION.key, outcome="error")
    )  # fmt: skip

    totals = await store.usage.totals(UsageFilter(root_key=SESSION.key))
    by_model = await store.usage.grouped("model", UsageFilter(day="2030-01-01"))
    rows = await store.usage.rows(UsageFilter())

    assert (totals.calls, totals.input_tokens, totals.output_tokens) == (3, 150, 25)
    assert (totals.cost_nanousd, totals.unpriced, totals.failed) == (3000, 1, 1)
    assert [(group.key, group.totals.calls) for group in by_model] == [
        ("openai/a", 2),
        ("other/b", 1),
    ]
    assert [row.cost_nanousd for row in rows] == [3000, None, None]


async def test_a_schedules_failures_are_counted_and_a_refused_run_leaves_the_count(
    store: Store,
) -> None:
    task = ScheduledTask(
        id="sch_1",
        session_key=SESSION.key,
        agent_id="main",
        kind="interval",
        spec="3600",
        tz="UTC",
        prompt="check the server",
        status="active",
        next_run=datetime(2030, 1, 1, tzinfo=UTC),
    )
    assert await store.schedules.create(task, cap=10)

    counts = []
    for failed, refused in [(True, False), (True, True), (False, True), (True, False)]:
        settled = await store.schedules.settle(
            task.id, None, failed=failed, pause_after=3, refused=refused
        )
        assert settled is not None
        counts.append((settled.failures, settled.status))
    cleared = await store.schedules.settle(task.id, None, failed=False, pause_after=3)

    assert counts == [(1, "active"), (1, "active"), (1, "active"), (2, "active")]
    assert cleared is not None and cleared.failures == 0
