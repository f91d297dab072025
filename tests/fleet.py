"""Several ``clawbot run`` processes on one database, behind one Telegram webhook: the
deployment of issue 32 (docs/deploy.md) as a test and a benchmark start it.

Each process has a home of its own (its intake journal, its serving lock) and the same
``CLAWBOT_DATABASE_URL``; each listens for the webhook on a port of its own, and all register
the same public URL, the load balancer's, which the Telegram stand-in plays
(:meth:`TelegramStandIn.balance_webhook`). Each process calls the model with an API key of
its own, so the model stand-in can tell who asked (:func:`process_of`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import TelegramHarness
from tests.test_edge_telegram import START_TIMEOUT, BotProcess, bot_environment, free_port

PUBLIC_URL = "https://bot.example.test/telegram"
"""The webhook URL every process registers: the load balancer's address."""
SECRET = "fleet-secret_0123456789"
KEY_PREFIX = "sk-fleet-process-"


def api_key(number: int) -> str:
    return f"{KEY_PREFIX}{number}-0000000000"


def process_of(key: str) -> int | None:
    """Which process called the model with this API key (None: none of the fleet's)."""
    if not key.startswith(KEY_PREFIX):
        return None
    return int(key.removeprefix(KEY_PREFIX).split("-", 1)[0])


@dataclass
class Fleet:
    """The processes, numbered from 0, and the port each listens on."""

    processes: list[BotProcess]
    ports: list[int]

    @classmethod
    async def start(
        cls,
        count: int,
        *,
        database_url: str | None,
        folder: Path,
        harness: TelegramHarness,
        model: OpenAIStandin,
        seed: int,
        **settings: str,
    ) -> Fleet:
        """Start ``count`` processes at once and return when every one has registered the
        webhook (it listens by then); the stand-in balances the webhook over them. Without
        a ``database_url`` each process keeps its home's SQLite file. AssertionError when a
        process exits or never registers (its log says why)."""
        ports = [free_port() for _ in range(count)]
        server = harness.server
        server.balance_webhook([f"http://127.0.0.1:{port}" for port in ports], seed=seed)
        before = sum(1 for method, _ in server.calls if method == "setWebhook")
        processes = []
        for number, port in enumerate(ports):
            env = bot_environment(
                folder,
                harness,
                model,
                CLAWBOT_HOME=str(folder / f"home-{number}"),
                CLAWBOT_TELEGRAM_MODE="webhook",
                CLAWBOT_TELEGRAM_WEBHOOK_URL=PUBLIC_URL,
                CLAWBOT_TELEGRAM_WEBHOOK_PORT=str(port),
                CLAWBOT_TELEGRAM_WEBHOOK_SECRET=SECRET,
                OPENAI_API_KEY=api_key(number),
                **({"CLAWBOT_DATABASE_URL": database_url} if database_url else {}),
                **settings,
            )
            processes.append(await BotProcess.start(env, folder))
        fleet = cls(processes, ports)

        def registered() -> bool:
            return sum(1 for method, _ in server.calls if method == "setWebhook") >= before + count

        ready = asyncio.create_task(server.wait_for(registered, START_TIMEOUT))
        exits = [asyncio.create_task(process.process.wait()) for process in processes]
        try:
            await asyncio.wait([ready, *exits], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in exits:
                task.cancel()
        if not ready.done() or ready.exception() is not None:
            ready.cancel()
            raise AssertionError("a process never registered the webhook:\n" + fleet.logs)
        return fleet

    @property
    def logs(self) -> str:
        return "\n".join(
            f"--- process {number} ---\n{process.log}"
            for number, process in enumerate(self.processes)
        )

    async def terminate(self, *, skip: frozenset[int] = frozenset()) -> list[int]:
        """SIGTERM the processes not in ``skip`` at once; their exit codes, in order."""
        running = [p for n, p in enumerate(self.processes) if n not in skip]
        return list(await asyncio.gather(*(process.terminate() for process in running)))
