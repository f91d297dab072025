"""The deployment files agree with each other and with clawbot: compose.yaml runs the
Dockerfile's image the way the image expects, Caddy reaches every clawbot process on the ports
it listens on, and the systemd unit is one systemd accepts.

The image itself is built and run by ``deploy/build-image`` in CI (``.ci/run``): not root,
bubblewrap inside, the healthcheck healthy, the sandbox working with compose's options, and
``tests/image_smoke.py``'s message answered by ``clawbot run`` in it on PostgreSQL.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

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


def test_caddy_spreads_each_webhook_over_every_clawbot_process() -> None:
    services = _clawbot_services()
    routes = dict(
        re.findall(r"^\s*reverse_proxy (\S+) ([^{\n]+?)\s*\{", CADDYFILE.read_text(), re.M)
    )
    for name, service in services.items():
        env = service["environment"]
        telegram = f"{name}:{env['CLAWBOT_TELEGRAM_WEBHOOK_PORT']}"
        slack = f"{name}:{env['CLAWBOT_SLACK_HTTP_PORT']}"
        assert telegram in routes[env["CLAWBOT_TELEGRAM_WEBHOOK_PATH"]].split(), name
        assert slack in routes[env["CLAWBOT_SLACK_HTTP_PATH"]].split(), name
        assert env["CLAWBOT_TELEGRAM_WEBHOOK_URL"].endswith(env["CLAWBOT_TELEGRAM_WEBHOOK_PATH"])
    upstreams = {upstream for targets in routes.values() for upstream in targets.split()}
    assert {u.split(":")[0] for u in upstreams} == set(services)


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
