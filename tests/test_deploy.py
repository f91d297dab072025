"""The deployment files agree with each other and with clawbot: compose.yaml runs the
Dockerfile's image the way the image expects, Caddy reaches every clawbot process on the ports
it listens on, and the systemd unit is one systemd accepts.

The image itself is built and run by ``deploy/build-image`` in CI (``.ci/run``): not root,
bubblewrap inside, the healthcheck healthy, the sandbox working with compose's options, and
``tests/image_smoke.py``'s message answered by ``clawbot run`` in it on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml
from aiohttp import web

from clawbot.cli.service import CLOSE_TIMEOUT
from clawbot.settings import Settings
from tests import image_smoke

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
CADDYFILE = ROOT / "deploy" / "Caddyfile"
UNIT = ROOT / "deploy" / "clawbot.service"
CHECK_IMAGE = ROOT / "deploy" / "check-image"
VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?][^}]*)?\}")
"""``${NAME}``, ``${NAME:?message}``, ``${NAME:-default}``: what compose fills from .env."""


def _compose() -> dict[str, Any]:
    """compose.yaml as compose reads it, its variables filled with example values."""
    example = {"POSTGRES_PASSWORD": "secret", "CLAWBOT_DOMAIN": "bot.example.com"}
    loaded = yaml.safe_load(VARIABLE.sub(lambda m: example[m.group(1)], COMPOSE.read_text()))
    assert isinstance(loaded, dict)
    return loaded


def _clawbot_services() -> dict[str, dict[str, Any]]:
    """The services that run the image built from the Dockerfile."""
    services = _compose()["services"]
    return {name: s for name, s in services.items() if s.get("build") == "."}


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, rest in _dockerfile_instructions():
        if keyword == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
    return env


def _dockerfile_exposed() -> set[int]:
    return {
        int(port)
        for keyword, rest in _dockerfile_instructions()
        if keyword == "EXPOSE"
        for port in rest.split()
    }


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, f"expected a duration in seconds, got {duration!r}"
    return float(match.group(1))


def _unit() -> dict[str, list[str]]:
    """The unit's keys and their values, in order (a key may repeat)."""
    keys: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            keys.setdefault(key.strip(), []).append(value.strip())
    return keys


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    """Compose's own check of compose.yaml (every key known, the merges resolved), with a
    .env as docs/deploy.md has people write it."""
    compose = shutil.which("docker-compose")
    assert compose, "docker-compose is missing: apt-get install docker-compose"
    (tmp_path / "compose.yaml").write_text(COMPOSE.read_text())
    (tmp_path / ".env").write_text("CLAWBOT_DOMAIN=bot.example.com\nPOSTGRES_PASSWORD=secret\n")
    done = subprocess.run(
        [compose, "--file", str(tmp_path / "compose.yaml"), "config", "--quiet"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_every_variable_compose_needs_has_a_line_in_env_example() -> None:
    """compose fills them from .env, which people make from .env.example."""
    needed = set(VARIABLE.findall(COMPOSE.read_text()))
    example = (ROOT / ".env.example").read_text()
    assert needed
    assert not {n for n in needed if not re.search(rf"^# {n}=", example, re.M)}


def test_compose_runs_two_clawbot_processes_each_with_its_own_home() -> None:
    services = _clawbot_services()
    home = _dockerfile_env()["CLAWBOT_HOME"]
    assert len(services) == 2
    homes = []
    for name, service in services.items():
        assert service["environment"]["CLAWBOT_HOME"] == home, name
        mounts = dict(reversed(volume.split(":", 1)) for volume in service["volumes"])
        homes.append(mounts[home])
        # The workspace and the agents are shared, so a turn finds what the last one wrote
        # whichever process runs it.
        assert mounts[f"{home}/workspace"] == "workspace", name
        assert mounts[f"{home}/agents"] == "agents", name
    assert len(set(homes)) == 2, "a serving process holds a lock on its home: one home each"


def test_compose_points_every_clawbot_process_at_its_postgres_service() -> None:
    compose = _compose()
    postgres = compose["services"]["postgres"]["environment"]
    for name, service in _clawbot_services().items():
        url = urlsplit(service["environment"]["CLAWBOT_DATABASE_URL"])
        assert url.scheme == "postgresql", name
        assert url.hostname == "postgres", name
        assert url.username == postgres["POSTGRES_USER"], name
        assert url.path == "/" + postgres["POSTGRES_DB"], name
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy", name


def test_compose_webhooks_listen_on_ports_the_image_exposes_beyond_the_container() -> None:
    exposed = _dockerfile_exposed()
    for name, service in _clawbot_services().items():
        env = service["environment"]
        assert env["CLAWBOT_TELEGRAM_MODE"] == "webhook", name
        assert env["CLAWBOT_SLACK_MODE"] == "http", name
        assert env["CLAWBOT_TELEGRAM_WEBHOOK_LISTEN"] == "0.0.0.0", name
        assert env["CLAWBOT_SLACK_HTTP_HOST"] == "0.0.0.0", name
        ports = {int(env["CLAWBOT_TELEGRAM_WEBHOOK_PORT"]), int(env["CLAWBOT_SLACK_HTTP_PORT"])}
        assert ports <= exposed, name


class Upstream:
    """One clawbot process as Caddy sees it: a web server that notes what reached it, and
    can stop answering (a process that died)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.paths: list[str] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _answer(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        return web.Response(text=self.name)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@contextlib.asynccontextmanager
async def _caddy(tmp_path: Path, upstreams: dict[str, Upstream]) -> AsyncIterator[str]:
    """deploy/Caddyfile run by Caddy on 127.0.0.1 over plain HTTP, each clawbot service's
    ``name:port`` dialled at the stand-in for it; yields the base URL."""
    caddy = shutil.which("caddy")
    assert caddy, "caddy is missing: apt-get install caddy"
    text = CADDYFILE.read_text()
    if _caddy_version(caddy) < (2, 6, 4):
        # Debian 12's Caddy (2.6.2) knows request_buffers by its former name.
        text = re.sub(r"request_buffers \S+", "buffer_requests", text)
    for target, upstream in upstreams.items():
        assert target in text, f"deploy/Caddyfile never sends anything to {target}"
        text = text.replace(target, f"127.0.0.1:{upstream.port}")
    port = _free_port()
    config = tmp_path / "Caddyfile"
    config.write_text("{\n\tadmin off\n}\n" + text)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "CLAWBOT_DOMAIN": f"http://127.0.0.1:{port}",
    }
    process = await asyncio.create_subprocess_exec(
        caddy, "run", "--adapter", "caddyfile", "--config", str(config),
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    stderr = process.stderr
    drained: asyncio.Task[bytes] | None = None
    try:
        async with asyncio.timeout(30):
            line = b""
            while b"serving initial configuration" not in line:
                line = await stderr.readline()
                assert line, "caddy stopped before serving"
        drained = asyncio.create_task(stderr.read())  # its log must not fill the pipe
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await process.wait()
        if drained is not None:
            await drained


def _caddy_version(caddy: str) -> tuple[int, ...]:
    done = subprocess.run([caddy, "version"], capture_output=True, text=True, check=True)
    found = re.match(r"v?(\d+)\.(\d+)\.(\d+)", done.stdout)
    assert found, done.stdout
    return tuple(int(part) for part in found.groups())


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_caddy_spreads_each_webhook_over_both_clawbot_processes(tmp_path: Path) -> None:
    services = _clawbot_services()
    routes: dict[str, list[Upstream]] = {}
    upstreams: dict[str, Upstream] = {}
    for name, service in services.items():
        env = service["environment"]
        for path, port in (
            (env["CLAWBOT_TELEGRAM_WEBHOOK_PATH"], env["CLAWBOT_TELEGRAM_WEBHOOK_PORT"]),
            (env["CLAWBOT_SLACK_HTTP_PATH"], env["CLAWBOT_SLACK_HTTP_PORT"]),
        ):
            upstream = upstreams[f"{name}:{port}"] = Upstream(f"{name}:{port}")
            routes.setdefault(path, []).append(upstream)
    for upstream in upstreams.values():
        await upstream.start()
    try:
        async with _caddy(tmp_path, upstreams) as base, aiohttp.ClientSession() as http:
            for path, behind in routes.items():
                answered = set()
                for _ in range(4):
                    async with http.post(base + path, data=b"{}") as response:
                        assert response.status == 200
                        answered.add(await response.text())
                assert answered == {u.name for u in behind}, path
                assert all(u.paths == [path] * 2 for u in behind), path
            async with http.post(base + "/elsewhere", data=b"{}") as response:
                assert response.status == 404
    finally:
        for upstream in upstreams.values():
            await upstream.stop()


async def test_caddy_sends_a_webhook_to_the_other_process_when_one_is_down(
    tmp_path: Path,
) -> None:
    env = next(iter(_clawbot_services().values()))["environment"]
    path, port = env["CLAWBOT_TELEGRAM_WEBHOOK_PATH"], env["CLAWBOT_TELEGRAM_WEBHOOK_PORT"]
    upstreams = {f"{name}:{port}": Upstream(name) for name in _clawbot_services()}
    down, up = upstreams.values()
    for upstream in upstreams.values():
        await upstream.start()
    try:
        async with _caddy(tmp_path, upstreams) as base, aiohttp.ClientSession() as http:
            await down.stop()
            for _ in range(4):
                async with http.post(base + path, data=b"{}") as response:
                    assert response.status == 200
                    assert await response.text() == up.name
    finally:
        for upstream in upstreams.values():
            await upstream.stop()


def test_compose_gives_clawbot_the_sandbox_options_the_image_check_proves() -> None:
    """deploy/check-image and tests/image_smoke.py show bubblewrap working inside with
    exactly these options."""
    proven = re.findall(r"--security-opt (\S+?)[ )]", CHECK_IMAGE.read_text())
    assert proven
    assert [word for opt in proven for word in ("--security-opt", opt)] == image_smoke.SANDBOX_OPTS
    for name, service in _clawbot_services().items():
        assert service["security_opt"] == proven, name


def test_compose_waits_for_running_turns_to_finish_on_stop() -> None:
    """Docker's default is 10 s, then SIGKILL: turns would be cut off mid-way."""
    needed = Settings().shutdown_timeout + CLOSE_TIMEOUT
    for name, service in _clawbot_services().items():
        assert _seconds(service["stop_grace_period"]) > needed, name
    assert _seconds(_unit()["TimeoutStopSec"][0] + "s") > needed


def test_the_image_healthcheck_is_clawbot_doctor_run_as_the_bot_user() -> None:
    instructions = _dockerfile_instructions()
    health = [rest for keyword, rest in instructions if keyword == "HEALTHCHECK"]
    assert len(health) == 1 and health[0].endswith('CMD ["clawbot", "doctor"]')
    user = [rest for keyword, rest in instructions if keyword == "USER"]
    assert user and not user[-1].startswith(("root", "0"))
    for name, service in _clawbot_services().items():
        assert "healthcheck" not in service and "user" not in service, name


def test_systemd_unit_runs_clawbot_as_its_user_with_its_home_in_its_state_directory() -> None:
    unit = _unit()
    assert unit["User"] == ["clawbot"]
    assert unit["ExecStart"][0].split()[1:] == ["run"]
    environment = dict(value.split("=", 1) for value in unit["Environment"])
    assert environment["CLAWBOT_HOME"] == "/var/lib/" + unit["StateDirectory"][0]
    assert unit["WorkingDirectory"] == [environment["CLAWBOT_HOME"]]


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """systemd-analyze verify: every key known, every value valid. The unit's clawbot is the
    one of this checkout's venv here, since verify also wants the program to exist."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    clawbot = Path(sys.executable).parent / "clawbot"
    assert clawbot.is_file()
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/opt/clawbot/.venv/bin/clawbot", str(clawbot)))
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    problems = [line for line in (done.stdout + done.stderr).splitlines() if unit.name in line]
    assert done.returncode == 0 and not problems, done.stdout + done.stderr
