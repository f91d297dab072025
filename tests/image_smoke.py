"""``clawbot run`` in the built image, end to end: a Telegram message through the webhook, a
turn on PostgreSQL, a shell command in bubblewrap's sandbox, the reply back in the chat, and
the container healthy. Not a pytest test (it needs Docker and a built image): CI runs it
through ``deploy/build-image`` while its daemon is up::

    .venv/bin/python -m tests.image_smoke IMAGE

Everything is on this machine: the container shares its network (``--network host``) and
reaches the Telegram Bot API stand-in, the OpenAI-compatible stand-in and a PostgreSQL server
started here, each on 127.0.0.1 and a free port. The container gets the sandbox options of
compose.yaml (``deploy/check-image``'s ``SANDBOX_OPTS``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import psycopg

from tests.postgres_server import PostgresServer, _free_port
from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import TelegramHarness

SANDBOX_OPTS = ["--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined"]
PROBE = "pwd; ls"
"""In the sandbox the workspace is mounted at /workspace (its real place is
/data/workspace): the shipped AGENTS.md is there, and nothing of the home beside it."""
WAIT_SECONDS = 180.0


class SmokeFailed(Exception):
    """What went wrong, for the CI log."""


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SmokeFailed(f"docker {args[0]} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _logs(name: str) -> str:
    """The container's output: clawbot logs to stderr."""
    done = subprocess.run(
        ["docker", "logs", "--tail", "80", name], capture_output=True, text=True, check=False
    )
    return done.stdout + done.stderr


def _health(name: str) -> str:
    return _docker("inspect", "-f", "{{.State.Health.Status}}", name)


async def _smoke(image: str, database_url: str, model: OpenAIStandin) -> None:
    telegram = TelegramHarness()
    await telegram.start()
    name = f"clawbot-smoke-{os.getpid()}"
    port = _free_port()
    env = {
        "CLAWBOT_DATABASE_URL": database_url,
        "CLAWBOT_MODEL": "openai/gpt-4o-mini",
        "OPENAI_API_BASE": model.base_url,
        "OPENAI_API_KEY": "sk-smoke",
        "CLAWBOT_TELEGRAM_TOKEN": telegram.token,
        "CLAWBOT_TELEGRAM_API_BASE": f"{telegram.server.url}/bot",
        "CLAWBOT_TELEGRAM_FILE_BASE": f"{telegram.server.url}/file/bot",
        "CLAWBOT_TELEGRAM_MODE": "webhook",
        "CLAWBOT_TELEGRAM_WEBHOOK_URL": f"http://127.0.0.1:{port}/telegram",
        "CLAWBOT_TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1",
        "CLAWBOT_TELEGRAM_WEBHOOK_PORT": str(port),
        "CLAWBOT_TELEGRAM_WEBHOOK_SECRET": "smoke-secret",
        "CLAWBOT_DM_POLICY": "open",
        "CLAWBOT_AUTONOMY": "full",
        "CLAWBOT_STREAMING": "off",
    }
    run = ["run", "-d", "--name", name, "--network", "host", *SANDBOX_OPTS]
    run += ["--health-interval", "1s", "--health-start-period", "0s", "--health-retries", "1"]
    for key, value in env.items():
        run += ["-e", f"{key}={value}"]
    _docker(*run, image)
    step = "waiting for clawbot to set its webhook"
    try:
        await telegram.server.wait_for(lambda: bool(telegram.server.webhook_url), WAIT_SECONDS)
        await telegram.inject_message("Run the probe, please.", sender_id="4242")
        step = "waiting for the reply"
        await telegram.wait_sent(1, timeout=WAIT_SECONDS)
        step = "checking the reply"
        shown = telegram.server.chat_shows(4242)
        print(f"image-smoke: the chat shows {shown}")
        if shown != ["Probe done."]:
            raise SmokeFailed(f"unexpected reply {shown}")
        tool_results = [
            message["content"]
            for request in model.requests
            for message in request["messages"]
            if message["role"] == "tool"
        ]
        print(f"image-smoke: shell_exec returned {tool_results}")
        if not any("\n/workspace\n" in r and "AGENTS.md" in r for r in tool_results):
            raise SmokeFailed("shell_exec did not run in the sandbox: " + json.dumps(tool_results))
        with psycopg.connect(database_url) as connection:
            roles = [row[0] for row in connection.execute("SELECT role FROM messages ORDER BY id")]
        print(f"image-smoke: PostgreSQL keeps the transcript {roles}")
        if roles[0] != "user" or roles[-1] != "assistant" or "tool" not in roles:
            raise SmokeFailed(f"the transcript in PostgreSQL is {roles}")
        step = "waiting for the healthcheck"
        deadline = time.monotonic() + WAIT_SECONDS
        while (status := _health(name)) == "starting" and time.monotonic() < deadline:
            await asyncio.sleep(1)
        if status != "healthy":
            raise SmokeFailed(f"the container is {status}")
        print("image-smoke: healthy on PostgreSQL")
    except (SmokeFailed, TimeoutError) as exc:
        print(_logs(name), file=sys.stderr)
        calls = [method for method, _ in telegram.server.calls]
        print(
            f"Telegram API calls: {calls}; model requests: {len(model.requests)}", file=sys.stderr
        )
        raise SmokeFailed(f"{step}: {type(exc).__name__} {exc}") from None
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
        await telegram.stop()


def main(image: str) -> int:
    script: list[str | dict[str, object]] = [
        {"tool_calls": [("shell_exec", {"command": PROBE})]},
        "Probe done.",
    ]
    server = PostgresServer()
    server.start()
    try:
        with OpenAIStandin(script).running() as model:
            asyncio.run(_smoke(image, server.new_database(), model))
    except SmokeFailed as exc:
        print(f"image-smoke: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "clawbot:latest"))
