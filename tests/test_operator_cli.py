"""The operator's commands: `clawbot run`, `clawbot doctor`, `clawbot pairing ...`."""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawbot.cli.main import app
from clawbot.messages import InboundMessage
from clawbot.routing.access import AccessGateway
from clawbot.settings import Settings
from clawbot.store import SqliteStore

from .standins.openai_api import OpenAIStandin
from .standins.telegram import TelegramHarness
from .test_cli import CLAWBOT, environment

TELEGRAM_TOKEN = "7312345678:AAFq3xW9ZkL2mN8pQ4rT6vY1bC5dE7gH9jK"
DISCORD_TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GhJkLm.aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5z"
SLACK_BOT_TOKEN = "xoxb-2468013579-1357924680-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_APP_TOKEN = "xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef"
OPENAI_KEY = "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"

runner = CliRunner()


@pytest.fixture(autouse=True)
def forget_cli_log_handlers() -> Iterator[None]:
    """The CLI logs to the stderr it was given; CliRunner's capture is gone after a test."""
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_clawbot", False):
            root.removeHandler(handler)


def doctor(home: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLAWBOT, "doctor"],
        env=environment(home, None, **env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


# ---- doctor -------------------------------------------------------------------------------


def test_doctor_reports_every_check_and_never_prints_a_secret(tmp_path: Path) -> None:
    secrets = {
        "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
        "DISCORD_BOT_TOKEN": DISCORD_TOKEN,
        "SLACK_BOT_TOKEN": SLACK_BOT_TOKEN,
        "SLACK_APP_TOKEN": "xoxb-this-is-the-wrong-kind-of-token-123456",
        "OPENAI_API_KEY": OPENAI_KEY,
    }

    result = doctor(tmp_path / "home", tmp_path, **secrets)

    output = result.stdout + result.stderr
    for value in secrets.values():
        assert value not in output
        assert value[-12:] not in output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ok       discord: ")
    assert lines[1].startswith("problem  slack: CLAWBOT_SLACK_APP_TOKEN does not look like")
    assert lines[2].startswith("ok       telegram: ")
    assert lines[3] == "ok       model openai/gpt-4o-mini: provider credentials are present"
    assert any(line.startswith("ok       database ") for line in lines)
    assert result.returncode == 1


def test_doctor_exits_0_when_everything_needed_is_there(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["doctor", "--home", str(tmp_path / "home")],
        env={"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
    )

    assert result.exit_code == 0, result.stdout
    assert "off      discord: not configured (CLAWBOT_DISCORD_TOKEN is not set" in result.stdout
    assert f"database {tmp_path / 'home' / 'clawbot.db'}: opens, schema version" in result.stdout


def test_doctor_says_which_key_the_model_needs(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["doctor", "--home", str(tmp_path / "home"), "--model", "anthropic/claude-sonnet-4-5"],
        env={"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "ANTHROPIC_API_KEY": ""},
    )

    assert result.exit_code == 1
    assert (
        "problem  model anthropic/claude-sonnet-4-5: no API key — set ANTHROPIC_API_KEY"
        in result.stdout
    )


def test_doctor_says_which_key_the_speech_model_needs(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["doctor", "--home", str(tmp_path / "home")],
        env={
            "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
            "OPENAI_API_KEY": OPENAI_KEY,
            "CLAWBOT_TTS_MODEL": "mistral/voxtral-mini-tts",
            "MISTRAL_API_KEY": "",
        },
    )

    assert result.exit_code == 1
    assert (
        "problem  speech model mistral/voxtral-mini-tts: no API key — set MISTRAL_API_KEY"
        in result.stdout
    )


def test_doctor_says_which_key_a_fallback_model_needs(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["doctor", "--home", str(tmp_path / "home")],
        env={
            "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN,
            "OPENAI_API_KEY": OPENAI_KEY,
            "CLAWBOT_FALLBACK_MODELS": "openai/gpt-4o,mistral/mistral-large-latest",
            "MISTRAL_API_KEY": "",
            "MISTRAL_API_KEYS": "",
        },
    )

    assert result.exit_code == 1
    assert "ok       fallback model openai/gpt-4o: provider credentials are present" in (
        result.stdout
    )
    assert (
        "problem  fallback model mistral/mistral-large-latest: no API key — set MISTRAL_API_KEY"
        in result.stdout
    )


def test_doctor_without_any_channel_says_what_to_set(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["doctor", "--home", str(tmp_path / "home")], env={"OPENAI_API_KEY": OPENAI_KEY}
    )

    assert result.exit_code == 1
    assert "problem  channels: none is configured" in result.stdout
    assert "CLAWBOT_TELEGRAM_TOKEN" in result.stdout


def test_doctor_reports_a_damaged_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "clawbot.db").write_bytes(b"not a database" * 100)

    result = runner.invoke(
        app,
        ["doctor", "--home", str(home)],
        env={"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
    )

    assert result.exit_code == 1
    assert f"problem  database {home / 'clawbot.db'}: the database" in result.stdout
    assert "move the file aside" in result.stdout


def test_doctor_reports_an_invalid_setting_as_a_problem(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["doctor"], env={"CLAWBOT_ALLOWED_GROUPS": "12345", "CLAWBOT_HOME": str(tmp_path)}
    )

    assert result.exit_code == 1
    assert result.stdout.startswith("problem  settings: invalid setting CLAWBOT_ALLOWED_GROUPS")


def test_doctor_says_which_settings_files_it_read_in_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "clawbot.toml").write_text("max_tool_rounds = 4\n")
    (tmp_path / "clawbot.toml").write_text("max_tool_rounds = 5\n")

    result = runner.invoke(
        app,
        ["doctor", "--home", str(home)],
        env={"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
    )

    assert (
        f"ok       settings files: read {home / 'clawbot.toml'}, then "
        f"{tmp_path / 'clawbot.toml'} (the later overrides)"
    ) in result.stdout.splitlines()


def test_doctor_says_where_it_looked_for_settings_files_when_there_are_none(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"

    result = runner.invoke(
        app,
        ["doctor", "--home", str(home)],
        env={"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
    )

    assert (
        f"ok       settings files: no clawbot.toml (looked for {home / 'clawbot.toml'} and "
        f"{tmp_path / 'clawbot.toml'})"
    ) in result.stdout.splitlines()


def test_doctor_flags_a_peer_group_that_names_an_unknown_agent(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text(
        '[peer_groups.research]\nagents = ["main", "resercher"]\n'
        '[peer_groups.writing]\nagents = ["main", "writer"]\n'
    )

    result = runner.invoke(
        app,
        ["doctor", "--home", str(tmp_path / "home")],
        env={"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
    )

    assert result.exit_code == 1
    assert (
        "problem  peer groups: group 'research' names 'resercher', which is no agent (did you "
        "mean researcher?) — correct the name in [peer_groups.<name>] of clawbot.toml or add "
        "the agent (`clawbot agents list` shows them)"
    ) in result.stdout.splitlines()


def test_doctor_lists_peer_groups_whose_agents_all_exist(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text('[peer_groups.writing]\nagents = ["main", "writer"]\n')

    result = runner.invoke(
        app,
        ["doctor", "--home", str(tmp_path / "home")],
        env={"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
    )

    assert "ok       peer groups: writing (main, writer)" in result.stdout.splitlines()


def approvers_line(tmp_path: Path, **env: str) -> tuple[int, str]:
    """``clawbot doctor``'s approvers line (Telegram configured) and its exit code."""
    env = {"TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "OPENAI_API_KEY": OPENAI_KEY, **env}
    result = runner.invoke(app, ["doctor", "--home", str(tmp_path / "home")], env=env)
    (line,) = [line for line in result.stdout.splitlines() if " approvers: " in line]
    return result.exit_code, line


def test_doctor_flags_an_approver_who_cannot_reach_the_bot(tmp_path: Path) -> None:
    code, line = approvers_line(
        tmp_path, CLAWBOT_APPROVERS="telegram:42,discord:7", CLAWBOT_DM_POLICY="allowlist"
    )

    assert code == 1
    assert line == (
        "problem  approvers: telegram:42 cannot reach the bot: no telegram group is allowed "
        "(CLAWBOT_ALLOWED_GROUPS) and telegram DMs take only allowed senders; discord:7 is on "
        "discord, which is not configured — allow a group they are in, or let them DM the bot"
    )


def test_doctor_passes_an_approver_who_can_answer_in_an_allowed_group(tmp_path: Path) -> None:
    code, line = approvers_line(
        tmp_path,
        CLAWBOT_APPROVERS="telegram:42",
        CLAWBOT_DM_POLICY="disabled",
        CLAWBOT_ALLOWED_GROUPS="telegram:-1001",
    )

    assert code == 0
    assert line == "ok       approvers: 1 listed, each can reach the bot where requests are shown"


# ---- run: refusing to start -----------------------------------------------------------------


def test_run_without_a_configured_channel_names_the_settings_to_set(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["run", "--home", str(tmp_path)], env={"OPENAI_API_KEY": OPENAI_KEY}
    )

    assert result.exit_code == 2
    assert result.output.strip() == (
        "clawbot: no channel is configured — set CLAWBOT_TELEGRAM_TOKEN (Telegram), "
        "CLAWBOT_DISCORD_TOKEN (Discord) or CLAWBOT_SLACK_BOT_TOKEN and CLAWBOT_SLACK_APP_TOKEN "
        "(Slack); `clawbot doctor` checks them"
    )


def test_run_of_a_misconfigured_channel_says_what_is_wrong_without_the_token(
    tmp_path: Path,
) -> None:
    result = runner.invoke(
        app,
        ["run", "--channel", "discord", "--home", str(tmp_path)],
        env={"DISCORD_BOT_TOKEN": "Bot " + DISCORD_TOKEN, "OPENAI_API_KEY": OPENAI_KEY},
    )

    assert result.exit_code == 2
    assert "discord is not ready: CLAWBOT_DISCORD_TOKEN must be the bare bot token" in (
        result.output
    )
    assert DISCORD_TOKEN not in result.output


def test_run_refuses_the_console_channel(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "-c", "console", "--home", str(tmp_path)])

    assert result.exit_code == 2
    assert "`clawbot chat`" in result.output


def test_run_names_the_known_channels_for_an_unknown_one(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "-c", "irc", "--home", str(tmp_path)])

    assert result.exit_code == 2
    assert "no channel adapter named 'irc'" in result.output
    assert "telegram" in result.output


# ---- run: a real process, stopped by SIGTERM ------------------------------------------------


async def test_sigterm_stops_a_running_bot_cleanly_and_promptly(tmp_path: Path) -> None:
    harness = TelegramHarness()
    await harness.start()
    standin = OpenAIStandin()
    try:
        with standin.running():
            env = environment(
                tmp_path / "home",
                standin,
                CLAWBOT_DM_POLICY="open",
                CLAWBOT_STREAMING="off",  # the reply read as sent; streaming is tested apart
                **_telegram_env(harness),
            )
            process = await asyncio.create_subprocess_exec(
                *CLAWBOT,
                "run",
                "--channel",
                "telegram",
                env=env,
                cwd=tmp_path,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            assert process.stderr is not None
            log = await _read_until(process.stderr, "telegram: receiving messages")

            await harness.inject_message("hello")
            sent = await harness.wait_sent(1, timeout=30)
            assert sent[0].text == "echo: hello"

            process.send_signal(signal.SIGTERM)
            began = time.monotonic()
            _out, err = await asyncio.wait_for(process.communicate(), timeout=30)
            took = time.monotonic() - began
    finally:
        await harness.stop()

    errors = log + err.decode()
    assert process.returncode == 0, errors
    assert took < 15
    assert "Traceback" not in errors
    assert "received SIGTERM: stopping" in errors
    assert harness.token not in errors


def _telegram_env(harness: TelegramHarness) -> dict[str, str]:
    return {
        "CLAWBOT_TELEGRAM_TOKEN": harness.token,
        "CLAWBOT_TELEGRAM_API_BASE": f"{harness.server.url}/bot",
        "CLAWBOT_TELEGRAM_FILE_BASE": f"{harness.server.url}/file/bot",
    }


async def _read_until(stream: asyncio.StreamReader, marker: str, timeout: float = 60) -> str:
    seen: list[str] = []

    async def read() -> None:
        while True:
            line = (await stream.readline()).decode()
            if not line:
                raise AssertionError("the process ended early:\n" + "".join(seen))
            seen.append(line)
            if marker in line:
                return

    await asyncio.wait_for(read(), timeout)
    return "".join(seen)


# ---- pairing ------------------------------------------------------------------------------


async def _request_code(settings: Settings, sender: str = "1001") -> str:
    store = await SqliteStore.open(settings.db_path)
    try:
        decision = await AccessGateway(store, settings)(
            InboundMessage(
                channel="telegram", chat_id=sender, sender_id=sender, sender_name="Ann", text="hi"
            )
        )
    finally:
        await store.close()
    match = re.search(r"pairing code is ([A-Z2-9]{8})", decision.reply or "")
    assert match
    return match.group(1)


def test_pairing_list_shows_the_waiting_codes(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, _env_file=None)  # type: ignore[call-arg]
    code = asyncio.run(_request_code(settings))

    result = runner.invoke(app, ["pairing", "list", "--home", str(tmp_path)])

    assert result.exit_code == 0
    assert re.fullmatch(
        rf"telegram  {code}  Ann \(1001\), expires in (60|59) min\n", result.stdout
    ), result.stdout


def test_pairing_list_says_when_nothing_waits(tmp_path: Path) -> None:
    result = runner.invoke(app, ["pairing", "list", "--home", str(tmp_path)])

    assert result.stdout == "No pairing codes are waiting.\n"


def test_pairing_approve_lets_the_sender_in(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, _env_file=None)  # type: ignore[call-arg]
    code = asyncio.run(_request_code(settings))

    result = runner.invoke(app, ["pairing", "approve", "telegram", code, "--home", str(tmp_path)])

    assert result.exit_code == 0
    assert result.stdout == (
        "Approved Ann (1001) on telegram. Their next message reaches the agent.\n"
    )

    async def approved() -> bool:
        store = await SqliteStore.open(settings.db_path)
        try:
            return await store.access.is_approved_sender("telegram", "1001")
        finally:
            await store.close()

    assert asyncio.run(approved())


def test_pairing_reject_refuses_the_request(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, _env_file=None)  # type: ignore[call-arg]
    code = asyncio.run(_request_code(settings))

    result = runner.invoke(app, ["pairing", "reject", "telegram", code, "--home", str(tmp_path)])
    listed = runner.invoke(app, ["pairing", "list", "--home", str(tmp_path)])

    assert result.stdout == "Rejected Ann on telegram.\n"
    assert listed.stdout == "No pairing codes are waiting.\n"


def test_pairing_approve_of_an_unknown_code_fails_with_what_to_do(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["pairing", "approve", "telegram", "ZZZZ2222", "--home", str(tmp_path)]
    )

    assert result.exit_code == 1
    assert "no pairing code ZZZZ2222 on telegram" in result.output
    assert "clawbot pairing list" in result.output


def test_the_cli_help_lists_the_operator_commands(tmp_path: Path) -> None:
    result = subprocess.run(
        [*CLAWBOT, "--help"], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )

    for command in ("run", "doctor", "pairing"):
        assert re.search(rf"^\W*{command}\b", result.stdout, re.M), result.stdout
