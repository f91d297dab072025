"""Two ``clawbot run`` processes on one PostgreSQL database, against the Telegram stand-in.

Telegram allows one long poll per bot at a time (a second ``getUpdates`` ends the first with
409 Conflict; the stand-in does the same and lists each conflict a bot heard). So exactly one
process polls, holding a leader lock in the database; the other sends only and takes the
polling over when the leader dies. Webhooks are served by every process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest
from pydantic import SecretStr

from clawbot.app import Clawbot
from clawbot.cli.checks import leader_checks
from clawbot.cli.service import Service
from clawbot.settings import Settings
from clawbot.store.postgres.leader import PostgresLeaderLock, lock_key, process_label
from tests.postgres_server import PostgresServer
from tests.spawned import spawn
from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import TelegramHarness
from tests.test_cli import CLAWBOT
from tests.test_edge_telegram import bot_environment, free_port, texts_to

pytestmark = pytest.mark.usefixtures("spawned_processes")
TIMEOUT = 60.0
RETRY = "0.2"
"""CLAWBOT_LEADER_RETRY_SECONDS here: a take-over within a fifth of a second of a death."""
LEADS = "telegram: this process leads telegram polling bot 123456789"
WAITS = "leads telegram polling bot 123456789; this process sends only"
TOOK_OVER = "telegram: this process took over telegram polling bot 123456789"
RECEIVING = "telegram: receiving messages"
SECRET = "hook-secret_123"


@dataclass
class Process:
    """One ``clawbot run``; its log (stderr) is read as it comes, and ``wait_for_line``
    returns once a line says what is awaited."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, env: dict[str, str], cwd: Path, channel: str = "telegram") -> Process:
        process = await spawn(
            *CLAWBOT, "run", "--channel", channel,
            env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        started = cls(process)
        started._reader = asyncio.create_task(started._read())
        return started

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            async with self._changed:
                self.lines.append(line.decode(errors="replace"))
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def said(self, text: str) -> bool:
        return text in self.log

    async def wait_for_line(self, text: str) -> None:
        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(
                    lambda: self.said(text) or self._reader is None or self._reader.done()
                )

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(until(), TIMEOUT)
        assert self.said(text), f"no line {text!r} in the log:\n{self.log}"

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)

    async def terminate(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.process.wait(), TIMEOUT)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, TIMEOUT)
        return code


@pytest.fixture
async def harness() -> AsyncIterator[TelegramHarness]:
    started = TelegramHarness()
    await started.start()
    yield started
    await started.stop()


@pytest.fixture
def model() -> Iterator[OpenAIStandin]:
    server = OpenAIStandin()
    with server.running():
        yield server


@pytest.fixture
def database(postgres_server: PostgresServer) -> str:
    return postgres_server.new_database(migrated=True)


def environment(
    home: Path, harness: TelegramHarness, model: OpenAIStandin, database: str, **extra: str
) -> dict[str, str]:
    """A process of its own home (as on its own machine) on the shared database."""
    return bot_environment(
        home,
        harness,
        model,
        CLAWBOT_DATABASE_URL=database,
        CLAWBOT_LEADER_RETRY_SECONDS=RETRY,
        **extra,
    )


async def replied(harness: TelegramHarness, chat_id: str, *processes: Process) -> list[str]:
    try:
        await harness.server.wait_for(lambda: bool(texts_to(harness, chat_id)), TIMEOUT)
    except TimeoutError:
        logs = "\n".join(process.log for process in processes)
        raise AssertionError(f"no reply in chat {chat_id}; logs:\n{logs}") from None
    return texts_to(harness, chat_id)


async def leader_and_follower(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin, database: str
) -> tuple[Process, Process]:
    """The first process, polling; then the second, sending only."""
    first = await Process.start(environment(tmp_path / "one", harness, model, database), tmp_path)
    await first.wait_for_line(LEADS)
    second = await Process.start(environment(tmp_path / "two", harness, model, database), tmp_path)
    await second.wait_for_line(WAITS)
    return first, second


async def test_of_two_processes_on_one_database_one_polls_telegram_and_both_stay_up(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin, database: str
) -> None:
    first, second = await leader_and_follower(tmp_path, harness, model, database)

    await harness.inject_message("hello from a shared database", sender_id="1001")
    replies = await replied(harness, "1001", first, second)
    codes = (await second.terminate(), await first.terminate())  # the follower first

    assert replies == ["echo: hello from a shared database"]
    assert harness.server.conflicts == []
    assert not second.said("this process leads") and not second.said("took over")
    assert codes == (0, 0), first.log + second.log


async def test_when_the_polling_process_is_killed_the_other_takes_over_and_answers(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin, database: str
) -> None:
    first, second = await leader_and_follower(tmp_path, harness, model, database)

    first.kill()
    await first.process.wait()
    await harness.inject_message("anyone there?", sender_id="1002")
    replies = await replied(harness, "1002", second)
    await second.wait_for_line(TOOK_OVER)
    code = await second.terminate()

    assert replies == ["echo: anyone there?"]
    assert harness.server.conflicts == []
    assert code == 0, second.log


async def test_a_process_that_stops_hands_the_polling_to_the_other(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin, database: str
) -> None:
    first, second = await leader_and_follower(tmp_path, harness, model, database)

    assert await first.terminate() == 0, first.log
    await second.wait_for_line(TOOK_OVER)
    await harness.inject_message("after the first stopped", sender_id="1003")
    replies = await replied(harness, "1003", second)
    await second.terminate()

    assert replies == ["echo: after the first stopped"]
    assert harness.server.conflicts == []


async def post_update(port: int, update: dict[str, object]) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"http://127.0.0.1:{port}/telegram",
            json=update,
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        ) as response,
    ):
        return response.status


async def test_two_processes_on_one_database_both_serve_telegram_webhooks(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin, database: str
) -> None:
    """Behind a load balancer: each process listens, and each answers what reaches it."""
    ports = [free_port(), free_port()]
    processes = []
    for name, port in zip(("one", "two"), ports, strict=True):
        env = environment(
            tmp_path / name, harness, model, database,
            CLAWBOT_TELEGRAM_MODE="webhook",
            CLAWBOT_TELEGRAM_WEBHOOK_URL=f"http://127.0.0.1:{ports[0]}/telegram",
            CLAWBOT_TELEGRAM_WEBHOOK_PORT=str(port),
            CLAWBOT_TELEGRAM_WEBHOOK_SECRET=SECRET,
        )  # fmt: skip
        process = await Process.start(env, tmp_path)
        await process.wait_for_line(RECEIVING)
        processes.append(process)

    statuses = [
        await post_update(
            port,
            {"update_id": 900 + index, "message": harness.build_message(text, sender_id=sender)},
        )
        for index, (port, sender, text) in enumerate(
            zip(ports, ("2001", "2002"), ("to one", "to two"), strict=True)
        )
    ]
    replies = [await replied(harness, sender, *processes) for sender in ("2001", "2002")]
    codes = [await process.terminate() for process in processes]

    assert statuses == [200, 200]
    assert replies == [["echo: to one"], ["echo: to two"]]
    assert codes == [0, 0]


# ---------------------------------------------------------------- the lock's connection lost


async def until_waiting_for_a_lock(admin: psycopg.AsyncConnection[Any], pid: int) -> None:
    """Return once the backend ``pid`` waits for a lock (asked again at each answer)."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            cursor = await admin.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            )
            row = await cursor.fetchone()
            if row is not None and row[0] == "Lock":
                return


async def test_a_leader_whose_lock_connection_is_lost_stops_polling_until_it_leads_again(
    tmp_path: Path, harness: TelegramHarness, settings: Settings, database: str
) -> None:
    """The database ends the lock's connection (a restart, a network cut) and another process
    takes the lock at once: this one must stop polling, or two would poll."""
    from adapters.telegram.adapter import TelegramAdapter

    settings = settings.model_copy(
        update={**harness.settings_kwargs(telegram_token=SecretStr(harness.token)),
                "leader_retry_seconds": 0.05}
    )  # fmt: skip
    adapter = TelegramAdapter.from_settings(settings)
    key = lock_key(adapter.exclusive_intake or "")
    server = harness.server
    async with await Clawbot.open(settings) as bot:
        service = Service(
            bot, [adapter], shutdown_timeout=5,
            leader_locks=lambda name: PostgresLeaderLock(database, name, "the leader"),
        )  # fmt: skip
        await service.start()
        leadership = service.leaderships[0]
        await server.wait_for(lambda: server.polls_waiting == 1, TIMEOUT)
        async with (
            await psycopg.AsyncConnection.connect(database, autocommit=True) as other,
            await psycopg.AsyncConnection.connect(database, autocommit=True) as admin,
        ):
            # Another process queues for the lock, so it gets it the instant it is freed.
            queued = asyncio.create_task(other.execute("SELECT pg_advisory_lock(%s)", (key,)))
            await until_waiting_for_a_lock(admin, other.info.backend_pid)
            await admin.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                " WHERE application_name LIKE 'the leader pid %'"
            )
            await asyncio.wait_for(queued, TIMEOUT)
            await asyncio.wait_for(leadership.waiting.wait(), TIMEOUT)
            # The other process polls now: alone, or one of the two polls hears a 409.
            calls = len(server.calls)
            polled = asyncio.create_task(long_poll(server.url, harness.token))
            await server.wait_for(lambda: len(server.calls) > calls, TIMEOUT)
            await harness.inject_message("for the new leader", sender_id="1004")
            status, body = await polled
        await asyncio.wait_for(leadership.leading.wait(), TIMEOUT)  # the lock is free again
        await server.wait_for(lambda: server.polls_waiting == 1, TIMEOUT)
        await service.stop()

    assert status == 200
    assert [update["message"]["text"] for update in body["result"]] == ["for the new leader"]
    assert server.conflicts == []


async def long_poll(url: str, token: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/bot{token}/getUpdates", json={"timeout": 5}) as response,
    ):
        return response.status, await response.json()


async def test_doctor_names_the_process_that_leads_the_polling(
    harness: TelegramHarness, settings: Settings, database: str
) -> None:
    from adapters.telegram.adapter import TelegramAdapter

    settings = settings.model_copy(
        update={**harness.settings_kwargs(telegram_token=SecretStr(harness.token)),
                "database_url": SecretStr(database)}
    )  # fmt: skip
    channels = {"telegram": TelegramAdapter}
    lock = PostgresLeaderLock(database, "telegram polling bot 123456789", "clawbot run")
    before = await leader_checks(settings, channels)
    assert await lock.try_take()
    try:
        during = await leader_checks(settings, channels)
    finally:
        await lock.release()

    assert [check.line for check in before] == [
        "ok       telegram polling bot 123456789: no process holds it now (none is serving)"
    ]
    assert [check.line for check in during] == [
        f"ok       telegram polling bot 123456789: led by `{process_label('clawbot run')}`"
    ]
    assert f"pid {os.getpid()}" in process_label("clawbot run")
