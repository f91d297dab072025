"""``clawbot onboard`` as a person runs it (a subprocess answering on stdin), against the
OpenAI-compatible stand-in and the Telegram Bot API stand-in: the model and the token are
checked before anything is written, no secret is echoed, the home's files are written (and
edited, never duplicated, on a second run), and ``clawbot doctor`` then reads them."""

from __future__ import annotations

import asyncio
import stat
import tomllib
from pathlib import Path

import pytest

from clawbot.cli.onboard_checks import SLACK_MANIFEST
from tests.spawned import spawn
from tests.standins.discord import DiscordHarness
from tests.standins.openai_api import OpenAIStandin
from tests.standins.slack import SlackHarness
from tests.standins.telegram import TelegramHarness
from tests.test_cli import CLAWBOT, environment
from tests.test_edge_discord import discord
from tests.test_edge_slack import slack
from tests.test_edge_telegram import harness

__all__ = ["discord", "harness", "slack"]

pytestmark = pytest.mark.usefixtures("spawned_processes")
KEY = "sk-onboard-" + "k3y9" * 6


async def onboard(env: dict[str, str], cwd: Path, *answers: str) -> tuple[int, str, str]:
    process = await spawn(
        *CLAWBOT,
        "onboard",
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(
        process.communicate("".join(f"{a}\n" for a in answers).encode()), 120
    )
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def setup_env(tmp_path: Path, standin: OpenAIStandin, harness: TelegramHarness) -> dict[str, str]:
    env = environment(
        tmp_path / "home", standin, CLAWBOT_TELEGRAM_API_BASE=f"{harness.server.url}/bot"
    )
    del env["OPENAI_API_KEY"]  # onboard asks for it
    return env


async def test_onboard_checks_the_model_and_the_token_then_writes_the_home_files(
    tmp_path: Path, standin: OpenAIStandin, harness: TelegramHarness
) -> None:
    env = setup_env(tmp_path, standin, harness)
    standin.script = ["ok"]

    code, out, err = await onboard(env, tmp_path, "", KEY, "telegram", harness.token, "pairing")

    home = tmp_path / "home"
    assert code == 0, err
    assert f"Telegram knows the bot as @{harness.server.bot_user['username']}" in out
    assert KEY not in out + err and harness.token not in out + err
    assert [r.get("max_tokens") for r in standin.requests] == [1]
    dotenv = (home / ".env").read_text().splitlines()
    assert dotenv == [f"OPENAI_API_KEY={KEY}", f"CLAWBOT_TELEGRAM_TOKEN={harness.token}"]
    assert stat.S_IMODE((home / ".env").stat().st_mode) == 0o600
    settings = tomllib.loads((home / "clawbot.toml").read_text())
    assert settings == {"model": "openai/gpt-4o-mini", "dm_policy": "pairing"}


async def test_running_onboard_again_edits_the_files_and_never_duplicates_a_line(
    tmp_path: Path, standin: OpenAIStandin, harness: TelegramHarness
) -> None:
    env = setup_env(tmp_path, standin, harness)
    home = tmp_path / "home"
    home.mkdir()
    (home / "clawbot.toml").write_text(
        '# mine\nlog_level = "INFO"\n\n[peer_groups.team]\nagents = ["main"]\n'
    )
    standin.script = ["ok", "ok"]
    answers = ("", KEY, "telegram", harness.token, "pairing")
    await onboard(env, tmp_path, *answers)

    code, _, err = await onboard(
        env, tmp_path, "openai/gpt-4o", "", "telegram", harness.token, "allowlist", "telegram:42"
    )

    assert code == 0, err
    text = (home / "clawbot.toml").read_text()
    assert text.count("model =") == 1 and text.startswith('# mine\nlog_level = "INFO"\n')
    settings = tomllib.loads(text)
    assert settings["model"] == "openai/gpt-4o" and settings["dm_policy"] == "allowlist"
    assert settings["allowed_senders"] == ["telegram:42"]
    assert settings["peer_groups"] == {"team": {"agents": ["main"]}}
    dotenv = (home / ".env").read_text()
    assert dotenv.count("OPENAI_API_KEY=") == 1 and dotenv.count("CLAWBOT_TELEGRAM_TOKEN=") == 1


async def test_a_token_the_platform_refuses_writes_nothing(
    tmp_path: Path, standin: OpenAIStandin, harness: TelegramHarness
) -> None:
    env = setup_env(tmp_path, standin, harness)
    standin.script = ["ok"]
    wrong = "123456:" + "W" * 35

    code, out, err = await onboard(env, tmp_path, "", KEY, "telegram", wrong, "pairing")

    assert code == 1
    assert "Telegram refused the token" in err and "nothing was written" in err
    assert wrong not in out + err
    assert not (tmp_path / "home" / ".env").exists()
    assert not (tmp_path / "home" / "clawbot.toml").exists()


async def test_a_key_the_provider_refuses_stops_before_the_platform(
    tmp_path: Path, standin: OpenAIStandin, harness: TelegramHarness
) -> None:
    env = setup_env(tmp_path, standin, harness)
    standin.script = [{"status": 401}]

    code, out, err = await onboard(env, tmp_path, "", KEY)

    assert code == 1
    assert "did not answer with that key" in err and "OPENAI_API_KEY" in err
    assert "Platform" not in out and KEY not in out + err
    assert not (tmp_path / "home" / ".env").exists()


async def test_doctor_reads_what_onboard_wrote_in_the_home(
    tmp_path: Path, standin: OpenAIStandin, harness: TelegramHarness
) -> None:
    env = setup_env(tmp_path, standin, harness)
    standin.script = ["ok"]
    await onboard(env, tmp_path, "", KEY, "telegram", harness.token, "pairing")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    process = await spawn(
        *CLAWBOT,
        "doctor",
        env=env,
        cwd=elsewhere,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    lines = out.decode().splitlines()

    assert any(line.startswith("ok") and "telegram" in line for line in lines), lines
    assert any(line.startswith("ok") and "model" in line for line in lines), lines
    assert KEY not in out.decode() and harness.token not in out.decode()


async def test_onboard_for_slack_shows_the_manifest_and_checks_both_tokens(
    tmp_path: Path, standin: OpenAIStandin, slack: SlackHarness
) -> None:
    env = environment(tmp_path / "home", standin, CLAWBOT_SLACK_API_BASE=slack.standin.api_base)
    del env["OPENAI_API_KEY"]
    standin.script = ["ok"]
    tokens = (slack.standin.bot_token, slack.standin.app_token)

    code, out, err = await onboard(env, tmp_path, "", KEY, "slack", *tokens, "open")

    assert code == 0, err
    assert SLACK_MANIFEST in out
    assert "Slack knows the bot as clawbot in Stand-in" in out
    assert not any(token in out + err for token in tokens)
    dotenv = (tmp_path / "home" / ".env").read_text()
    assert f"CLAWBOT_SLACK_BOT_TOKEN={tokens[0]}" in dotenv
    assert f"CLAWBOT_SLACK_APP_TOKEN={tokens[1]}" in dotenv


def test_the_manifest_onboard_shows_is_the_one_the_platforms_doc_gives() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "platforms.md").read_text()
    block = doc.split("From a manifest). The\nessentials:\n\n```yaml\n", 1)[1].split("```", 1)[0]

    assert block == SLACK_MANIFEST


async def test_onboard_for_discord_names_the_bot_user_the_token_belongs_to(
    tmp_path: Path, standin: OpenAIStandin, discord: DiscordHarness
) -> None:
    base = discord.server.api_base
    env = environment(tmp_path / "home", standin, CLAWBOT_DISCORD_API_BASE=base)
    del env["OPENAI_API_KEY"]
    standin.script = ["ok"]
    token = discord.server.token

    code, out, err = await onboard(env, tmp_path, "", KEY, "discord", token, "pairing")

    assert code == 0, err
    assert f"Discord knows the bot as {discord.server.bot_user['username']}" in out
    assert token not in out + err
    assert f"CLAWBOT_DISCORD_TOKEN={token}" in (tmp_path / "home" / ".env").read_text()
