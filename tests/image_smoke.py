"""``clawbot run`` in the built image, end to end, twice: as compose.yaml runs it (the image's
own entrypoint and healthcheck) and as deploy/clawbot.service runs it (systemd in a container
made from the image, the unit's hardening in force). Each time a Telegram message comes
through the webhook, a turn runs on PostgreSQL, the model's shell command runs in bubblewrap's
sandbox and the reply reaches the chat. Not a pytest test (it needs Docker and a built image):
CI runs it through ``deploy/build-image`` while its daemon is up::

    .venv/bin/python -m tests.image_smoke IMAGE

Everything is on this machine: the containers share its network (``--network host``) and
reach the Telegram Bot API stand-in, the OpenAI-compatible stand-in and a PostgreSQL server
started here, each on 127.0.0.1 and a free port.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from tests.postgres_server import PostgresServer, _free_port
from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import TelegramHarness

UNIT = Path(__file__).resolve().parent.parent / "deploy" / "clawbot.service"
SANDBOX_OPTS = ["--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined"]
"""compose.yaml's options for the clawbot services (``deploy/check-image``'s too)."""
SYSTEMD_OPTS = [*SANDBOX_OPTS, "--cap-add", "SYS_ADMIN", "--cgroupns", "host"]
SYSTEMD_OPTS += ["-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/tmp"]
"""What systemd needs to run as a container's first process; none of it reaches the service,
which runs as the unit says (user clawbot, no capabilities, the unit's hardening)."""
WITH_SYSTEMD = """ARG IMAGE
FROM ${IMAGE}
USER root
RUN apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd \\
    && rm -rf /var/lib/apt/lists/*
COPY clawbot.service /etc/systemd/system/clawbot.service
ENTRYPOINT ["/lib/systemd/systemd"]
CMD []
"""
PROBE = "pwd; ls"
"""In the sandbox the workspace is mounted at /workspace (its real place is
/data/workspace): the shipped AGENTS.md is there, and nothing of the home beside it."""
WAIT_SECONDS = 180.0
SETTLED = {"running", "degraded"}
"""What ``systemctl is-system-running --wait`` says once systemd has booted (a container
lacks some of a machine's units, so "degraded" is fine: the service's own state is checked)."""


class SmokeFailed(Exception):
    """What went wrong, for the CI log."""


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SmokeFailed(f"docker {args[0]} failed: {done.stderr.strip()}")
    return done.stdout.strip()


class Container:
    """clawbot as compose.yaml runs it: the image's entrypoint, compose's sandbox options."""

    def __init__(self, image: str, name: str) -> None:
        self.image = image
        self.name = name

    def start(self, env: dict[str, str]) -> None:
        run = ["run", "-d", "--name", self.name, "--network", "host", *SANDBOX_OPTS]
        run += ["--health-interval", "1s", "--health-start-period", "0s", "--health-retries", "1"]
        for key, value in env.items():
            run += ["-e", f"{key}={value}"]
        _docker(*run, self.image)

    async def check(self) -> None:
        """The image's healthcheck turns the container healthy."""
        deadline = time.monotonic() + WAIT_SECONDS
        health = "starting"
        while health == "starting" and time.monotonic() < deadline:
            health = _docker("inspect", "-f", "{{.State.Health.Status}}", self.name)
            await asyncio.sleep(1)
        if health != "healthy":
            raise SmokeFailed(f"the container is {health}")
        print("image-smoke: the container is healthy")

    def logs(self) -> str:
        """clawbot logs to stderr."""
        return _output(["docker", "logs", "--tail", "80", self.name])


class Systemd:
    """clawbot as deploy/clawbot.service runs it: systemd in a container made from the
    image, the home in /var/lib/clawbot with its .env, set up as docs/deploy.md says."""

    def __init__(self, image: str, name: str) -> None:
        self.image = image
        self.name = name

    def start(self, env: dict[str, str]) -> None:
        tag = f"{self.image}-systemd"
        with tempfile.TemporaryDirectory() as context:
            (Path(context) / "Dockerfile").write_text(WITH_SYSTEMD)
            (Path(context) / UNIT.name).write_text(UNIT.read_text())
            build = ["build", "-q", "--network", "host", "--build-arg", f"IMAGE={self.image}"]
            _docker(*build, "-t", tag, context)
        _docker("run", "-d", "--name", self.name, "--network", "host", *SYSTEMD_OPTS, tag)
        print(f"image-smoke: systemd is {self._booted()}")
        dotenv = "".join(f"{key}={value}\n" for key, value in env.items())
        setup = (
            "install -d -o clawbot -g clawbot -m 700 /var/lib/clawbot"
            " && install -o clawbot -g clawbot -m 600 /dev/stdin /var/lib/clawbot/.env"
            " && systemctl start clawbot"
        )
        done = subprocess.run(
            ["docker", "exec", "-i", self.name, "sh", "-c", setup],
            input=dotenv, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SmokeFailed(f"the service did not start: {done.stderr.strip()}")

    def _booted(self) -> str:
        """systemd's state once it has booted. Until it has made /run/systemd/system,
        ``systemctl`` says "offline" at once, and until its bus is up it cannot connect:
        both mean "not yet" (a CI run that asked too early failed on the first)."""
        deadline = time.monotonic() + WAIT_SECONDS
        wait = ["docker", "exec", self.name, "systemctl", "is-system-running", "--wait"]
        while True:
            state = _output(wait).strip()
            if state.splitlines() and state.splitlines()[-1] in SETTLED:
                return state.splitlines()[-1]
            running = _docker("inspect", "-f", "{{.State.Running}}", self.name)
            if running != "true" or time.monotonic() > deadline:
                logs = _output(["docker", "logs", "--tail", "40", self.name])
                raise SmokeFailed(f"systemd did not boot ({state!r}, running: {running}):\n{logs}")
            time.sleep(0.2)

    async def check(self) -> None:
        """The service is active, as the user clawbot, with the unit's hardening in force
        (no new privileges, /usr read-only): bubblewrap worked under it."""
        show = ["systemctl", "show", "clawbot", "--property", "ActiveState,MainPID"]
        state = dict(line.split("=", 1) for line in _docker("exec", self.name, *show).split())
        proc = f"/proc/{state['MainPID']}"
        user = _docker("exec", self.name, "stat", "-c", "%U", proc)
        status = _docker("exec", self.name, "cat", f"{proc}/status")
        mounts = _docker("exec", self.name, "cat", f"{proc}/mountinfo").splitlines()
        hardened = "NoNewPrivs:\t1" in status and "ro" in _mount_options(mounts, "/usr")
        if state["ActiveState"] != "active" or user != "clawbot" or not hardened:
            raise SmokeFailed(
                f"the service is {state['ActiveState']}, run by {user}, hardened: {hardened}"
            )
        print("image-smoke: the service is active, run by clawbot, hardened as the unit says")

    def logs(self) -> str:
        return _output(["docker", "exec", self.name, "journalctl", "-u", "clawbot", "-n", "80"])


def _mount_options(mountinfo: list[str], path: str) -> list[str]:
    """The options of the mount ``path`` is on: the last of the longest mount points above
    it (a later mount on the same point covers the earlier)."""
    best: list[str] = []
    best_point = ""
    for line in mountinfo:
        fields = line.split()
        point = fields[4]
        above = point == "/" or path == point or path.startswith(point.rstrip("/") + "/")
        if above and len(point) >= len(best_point):
            best, best_point = fields[5].split(","), point
    return best


def _output(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


async def _smoke(image: str, database_url: str, model: OpenAIStandin, *, systemd: bool) -> None:
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
    launcher = Systemd(image, name) if systemd else Container(image, name)
    step = "starting clawbot"
    try:
        launcher.start(env)
        step = "waiting for clawbot to set its webhook"
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
        step = "checking the process"
        await launcher.check()
    except (SmokeFailed, TimeoutError) as exc:
        print(launcher.logs(), file=sys.stderr)
        calls = [method for method, _ in telegram.server.calls]
        print(
            f"Telegram API calls: {calls}; model requests: {len(model.requests)}", file=sys.stderr
        )
        raise SmokeFailed(f"{step}: {type(exc).__name__} {exc}") from None
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
        await telegram.stop()


def main(image: str) -> int:
    server = PostgresServer()
    server.start()
    try:
        for systemd in (False, True):
            print(f"image-smoke: {'deploy/clawbot.service' if systemd else 'the image'}")
            script: list[str | dict[str, object]] = [
                {"tool_calls": [("shell_exec", {"command": PROBE})]},
                "Probe done.",
            ]
            with OpenAIStandin(script).running() as model:
                asyncio.run(_smoke(image, server.new_database(), model, systemd=systemd))
    except SmokeFailed as exc:
        print(f"image-smoke: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "clawbot:latest"))
