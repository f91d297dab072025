"""``clawbot run --console``: the bot and its console in one process, against the Telegram
Bot API stand-in and the OpenAI-compatible stand-in; the login URL printed once on stdout
(never in the log) opens a console that lists the chat the bot just answered."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest

from tests.spawned import spawn
from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import TelegramHarness
from tests.test_cli import CLAWBOT
from tests.test_edge_telegram import bot_environment, harness, model, texts_to

__all__ = ["harness", "model"]

pytestmark = pytest.mark.usefixtures("spawned_processes")
TIMEOUT = 60.0


async def test_run_with_the_console_serves_both_and_prints_the_login_url_once(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    env = bot_environment(tmp_path, harness, model)
    process = await spawn(
        *CLAWBOT,
        "run",
        "--channel",
        "telegram",
        "--console",
        "--port",
        "0",
        env=env,
        cwd=tmp_path,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    line = (await asyncio.wait_for(process.stdout.readline(), TIMEOUT)).decode()
    url = line.removeprefix("Web console: open ").strip()
    token = url.split("token=", 1)[1]
    model.script = ["Hello from the bot."]

    await harness.inject_message("hi", sender_id="4242", sender_name="Ann")
    await harness.server.wait_for(lambda: bool(texts_to(harness, "4242")), TIMEOUT)
    async with httpx.AsyncClient() as client:
        login = await client.get(url)
        cookie = login.cookies["clawbot_console"]
        page = await client.get(
            url.split("/login", 1)[0] + "/",
            params={"q": "telegram"},
            headers={"cookie": f"clawbot_console={cookie}"},
        )
    process.send_signal(signal.SIGTERM)
    rest, log = await asyncio.wait_for(process.communicate(), TIMEOUT)

    assert page.status_code == 200 and "telegram:4242" in page.text
    assert process.returncode == 0, log.decode()
    assert token not in log.decode() and token not in rest.decode()
