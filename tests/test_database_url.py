"""Choosing the database: ``CLAWBOT_DATABASE_URL=postgresql://...`` keeps everything in
PostgreSQL, without it the home's SQLite file; ``clawbot db status`` and ``clawbot db
migrate`` on both; a URL's password never shows."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from clawbot.app import Clawbot
from clawbot.cli.common import serving_lock
from clawbot.cli.main import app
from clawbot.errors import StoreError
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import database_name, new_id, open_store
from clawbot.store.backend import open_url
from clawbot.store.migrations import migrations
from clawbot.store.postgres.dialect import postgres
from clawbot.store.postgres.migrate import latest as postgres_latest
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import STORE_SESSION, Chat
from .postgres_server import PostgresServer


def test_db_status_then_migrate_bring_a_new_postgresql_database_up_to_date(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database()
    runner = CliRunner()

    before = runner.invoke(app, ["db", "status", "--url", url])
    migrated = runner.invoke(app, ["db", "migrate", "--url", url])
    after = runner.invoke(app, ["db", "status", "--url", url])

    latest = postgres_latest()
    assert f"postgresql 127.0.0.1:{postgres_server.port}/" in before.output
    assert f"schema 0 of {latest}, {latest} migration(s) to apply" in before.output
    assert migrated.exit_code == 0 and f"applied {latest} migration(s)" in migrated.output
    assert f"schema {latest} of {latest}, up to date" in after.output


def test_db_status_then_migrate_on_the_homes_sqlite_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runner = CliRunner()

    before = runner.invoke(app, ["db", "status", "--home", str(home)])
    migrated = runner.invoke(app, ["db", "migrate", "--home", str(home)])
    again = runner.invoke(app, ["db", "migrate", "--home", str(home)])

    latest = migrations()[-1].number
    assert before.output.startswith("sqlite ") and f"schema 0 of {latest}" in before.output
    assert f"applied {latest} migration(s)" in migrated.output
    assert "applied 0 migration(s)" in again.output and "up to date" in again.output
    assert (home / "clawbot.db").exists()


async def test_a_bot_with_a_postgresql_url_keeps_its_conversation_there(
    postgres_server: PostgresServer, settings: Settings, scripted: ScriptedModel
) -> None:
    url = postgres_server.new_database()
    on_postgres = settings.model_copy(update={"database_url": SecretStr(url)})
    scripted.add("Hello there!")

    async with await Clawbot.open(on_postgres) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await Chat(bot, channel).say("hi")

    assert channel.texts == ["Hello there!"]
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT role FROM messages ORDER BY id").fetchall()
    assert rows == [("user",), ("assistant",)]
    assert not on_postgres.db_path.exists()


async def test_a_postgresql_server_that_cannot_be_reached_is_named_without_the_password(
    settings: Settings,
) -> None:
    closed = settings.model_copy(
        update={"database_url": SecretStr("postgresql://bot:hunter2@127.0.0.1:1/clawbot")}
    )

    with pytest.raises(StoreError) as raised:
        await open_store(closed)

    assert "127.0.0.1:1/clawbot" in str(raised.value)
    assert "hunter2" not in str(raised.value)


def test_an_unknown_database_url_scheme_is_a_clear_setting_error() -> None:
    with pytest.raises(ValueError, match="postgresql://"):
        Settings(database_url="mysql://x/y", _env_file=None)  # type: ignore[call-arg,arg-type]


@pytest.mark.parametrize(
    ("sqlite", "expected"),
    [
        (
            "SELECT a FROM t WHERE b = ? AND c LIKE '%x?'",
            "SELECT a FROM t WHERE b = %s AND c LIKE '%%x?'",
        ),
        (
            "INSERT OR IGNORE INTO inbound_seen (a) VALUES (?)",
            "INSERT INTO inbound_seen (a) VALUES (%s) ON CONFLICT DO NOTHING",
        ),
        (
            "UPDATE t SET a = 1 WHERE owner IS ?",
            "UPDATE t SET a = 1 WHERE owner IS NOT DISTINCT FROM %s",
        ),
        (
            "INSERT INTO messages (a) VALUES (?)",
            "INSERT INTO messages (a) VALUES (%s) RETURNING id",
        ),
        ("INSERT INTO turn_jobs (a) VALUES (?)", "INSERT INTO turn_jobs (a) VALUES (%s)"),
    ],
)
def test_the_repositories_sqlite_sql_is_rewritten_for_postgresql(
    sqlite: str, expected: str
) -> None:
    assert postgres(sqlite).sql == expected


def test_the_database_is_named_to_a_person_without_the_password(settings: Settings) -> None:
    on_postgres = settings.model_copy(
        update={"database_url": SecretStr("postgresql://bot:hunter2@db.example:5433/clawbot")}
    )

    assert database_name(on_postgres) == "postgresql db.example:5433/clawbot"
    assert database_name(settings) == str(settings.db_path)


async def test_on_postgresql_an_accepted_message_is_committed_when_submit_returns(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database(migrated=True)
    store = await open_url(url)
    try:
        await store.sessions.create(STORE_SESSION)
        job = TurnJob(id=new_id("turn"), session_key=STORE_SESSION.key, status="running")
        entry = TranscriptEntry(role="user", content=(TextBlock(text="hi"),))

        await store.jobs.submit(STORE_SESSION, job, entry=entry, dedup_id="m1")

        # no journal in front of it, no flush: another connection sees it at once
        with psycopg.connect(url) as other:
            seen = other.execute("SELECT message_id FROM inbound_seen").fetchall()
            jobs = other.execute("SELECT id FROM turn_jobs").fetchall()
        assert (seen, jobs) == ([("m1",)], [(job.id,)])
    finally:
        await store.close()


async def test_a_read_only_postgresql_database_is_refused_at_start(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database(migrated=True)
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.url("postgres"), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    store = await open_url(url)
    try:
        with pytest.raises(StoreError, match="is read-only"):
            await store.check_writable()
    finally:
        await store.close()


async def test_a_lost_postgresql_connection_is_one_clear_error_and_the_next_call_reconnects(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database(migrated=True)
    store = await open_url(url)
    try:
        await store.sessions.create(STORE_SESSION)
        with psycopg.connect(url, autocommit=True) as admin:  # as a server restart would
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )

        with pytest.raises(StoreError, match="lost the PostgreSQL database"):
            await store.sessions.get(STORE_SESSION.key)
        assert await store.sessions.get(STORE_SESSION.key) == STORE_SESSION
    finally:
        await store.close()


def test_two_homes_on_one_postgresql_database_may_both_serve_it(
    postgres_server: PostgresServer, settings: Settings, tmp_path: Path
) -> None:
    """Several processes share a PostgreSQL database (a platform connection allowed once per
    bot is held by a leader lock instead: tests/test_leader_polling.py)."""
    url = SecretStr(postgres_server.new_database(migrated=True))
    first = settings.model_copy(update={"database_url": url, "home": tmp_path / "one"})
    second = settings.model_copy(update={"database_url": url, "home": tmp_path / "two"})

    with serving_lock(first, "clawbot run"), serving_lock(second, "clawbot run"):
        pass
