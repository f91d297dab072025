"""``clawbot onboard`` as a new operator runs it: typed in a pseudo-terminal, the model
checked against the OpenAI-compatible stand-in and the token against the platform's stand-in,
then ``clawbot run`` started on what it wrote."""

from __future__ import annotations

import asyncio
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from dotenv import dotenv_values

from .standins.discord import DiscordHarness
from .standins.openai_api import OpenAIStandin
from .standins.slack import SlackHarness
from .standins.telegram import TelegramHarness
from .test_chat_terminal import Step, typed_steps
from .test_cli import CLAWBOT, environment

KEY = "sk-onboard-right-key-0123456789abcdef"
WRONG_KEY = "sk-onboard-wrong-key-9876543210fedcba"
WRONG_TOKEN = "123456789:AAHwrongTOKENyyyyyyyyyyyyyyyyyyyyyy_"


def onboard_env(home: Path, standin: OpenAIStandin, **extra: str) -> dict[str, str]:
    """A new operator's environment: no key, no token; the model's provider is the stand-in."""
    env = environment(home, None, OPENAI_API_BASE=standin.base_url, **extra)
    env.pop("CLAWBOT_AUTONOMY", None)
    return env


def telegram_env(harness: TelegramHarness) -> dict[str, str]:
    """Where the Telegram stand-in is (a setting like any other; the token is not here)."""
    return {
        "CLAWBOT_TELEGRAM_API_BASE": f"{harness.server.url}/bot",
        "CLAWBOT_TELEGRAM_FILE_BASE": f"{harness.server.url}/file/bot",
    }


def model_steps(*keys: str) -> list[Step]:
    """The model question answered with the default, then each key in turn (all but the last
    rejected)."""
    steps: list[Step] = [(b"", b"Model ["), (b"\r", b"(hidden): ")]
    for key in keys[:-1]:
        steps.append((key.encode() + b"\r", b"Rejected"))
        steps.append((b"", b"(hidden): "))
    steps.append((keys[-1].encode() + b"\r", b" answered."))
    return steps


def access_steps(policy: bytes, allowed: bytes) -> list[Step]:
    return [
        (b"", b"DM policy"),
        (policy + b"\r", b"Allowed (- for nobody)"),
        (allowed + b"\r", b"Start the bot with"),
    ]


async def onboarded_on_telegram(
    home: Path,
    cwd: Path,
    harness: TelegramHarness,
    standin: OpenAIStandin,
    *,
    tokens: tuple[str, ...] = (),
    keys: tuple[str, ...] = (KEY,),
    policy: bytes = b"open",
    allowed: bytes = b"1001",
) -> str:
    """Run ``clawbot onboard`` choosing Telegram; what the terminal showed."""
    typed = tokens or (harness.token,)
    steps = model_steps(*keys)
    steps.append((b"", b"Platform (telegram, discord, slack) [telegram]: "))
    steps.append((b"\r", b"(hidden): "))
    for token in typed[:-1]:
        steps += [(token.encode() + b"\r", b"Rejected"), (b"", b"(hidden): ")]
    steps.append((typed[-1].encode() + b"\r", b"ok: Telegram knows this bot as"))
    steps += access_steps(policy, allowed)
    env = onboard_env(home, standin, **telegram_env(harness))
    shown = await asyncio.to_thread(typed_steps, env, cwd, steps, ("onboard",))
    return shown.decode(errors="replace")


@pytest.fixture
async def telegram() -> object:
    harness = TelegramHarness()
    await harness.start()
    yield harness
    await harness.stop()


@pytest.fixture
def provider() -> object:
    standin = OpenAIStandin()
    standin.api_key = KEY
    with standin.running():
        yield standin


async def test_onboard_writes_the_key_and_token_to_the_home_env_and_the_rest_to_clawbot_toml(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    await onboarded_on_telegram(home, tmp_path, telegram, provider)

    assert dotenv_values(home / ".env") == {
        "CLAWBOT_TELEGRAM_TOKEN": telegram.token,
        "OPENAI_API_KEY": KEY,
    }
    assert (home / "clawbot.toml").read_text() == (
        'model = "openai/gpt-4o-mini"\ndm_policy = "open"\nallowed_senders = ["telegram:1001"]\n'
    )


async def test_the_env_file_is_readable_by_its_owner_alone(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    await onboarded_on_telegram(home, tmp_path, telegram, provider)

    assert stat.S_IMODE((home / ".env").stat().st_mode) == 0o600


async def test_the_key_and_token_typed_are_never_shown(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    shown = await onboarded_on_telegram(tmp_path / "home", tmp_path, telegram, provider)

    assert KEY not in shown
    assert telegram.token not in shown
    assert telegram.token.split(":")[1] not in shown


async def test_the_telegram_bot_s_name_is_fetched_and_shown(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    shown = await onboarded_on_telegram(tmp_path / "home", tmp_path, telegram, provider)

    assert "Telegram knows this bot as @clawbot_test_bot (Clawbot)." in shown
    assert [method for method, _ in telegram.server.calls] == ["getMe"]


async def test_the_model_is_checked_with_one_call_of_one_token(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    await onboarded_on_telegram(tmp_path / "home", tmp_path, telegram, provider)

    assert len(provider.requests) == 1
    assert provider.requests[0]["max_tokens"] == 1


async def test_a_rejected_token_is_asked_again_saying_only_that_it_was_rejected(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    shown = await onboarded_on_telegram(
        home, tmp_path, telegram, provider, tokens=(WRONG_TOKEN, telegram.token)
    )

    assert "Rejected: Telegram rejected the token. Enter it again." in shown
    assert WRONG_TOKEN.split(":")[1] not in shown
    assert dotenv_values(home / ".env")["CLAWBOT_TELEGRAM_TOKEN"] == telegram.token


async def test_a_rejected_model_key_is_asked_again_without_the_provider_s_words(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    shown = await onboarded_on_telegram(home, tmp_path, telegram, provider, keys=(WRONG_KEY, KEY))

    assert "Rejected: the provider of 'openai/gpt-4o-mini' rejected the key." in shown
    # the stand-in, as OpenAI, quotes the key's start and end in its refusal
    assert "Incorrect API key" not in shown
    assert "wrong-key" not in shown and WRONG_KEY[-4:] not in shown
    assert dotenv_values(home / ".env")["OPENAI_API_KEY"] == KEY


async def test_running_it_again_edits_the_files_keeping_comments_and_other_lines(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text(
        "# my keys\nANTHROPIC_API_KEY=sk-ant-kept\nOPENAI_API_KEY=sk-old\n"
        "CLAWBOT_TELEGRAM_TOKEN=old\nexport OPENAI_API_KEY=sk-older\n"
    )
    (home / "clawbot.toml").write_text(
        '# my settings\nmodel = "openai/gpt-4o"  # the big one\nmax_tool_rounds = 5\n'
        'allowed_senders = ["slack:U0123ABCD", "telegram:42"]\n\n'
        '[peer_groups.team]\nagents = ["main"]\n'
    )

    await onboarded_on_telegram(home, tmp_path, telegram, provider, policy=b"allowlist")

    assert (home / ".env").read_text() == (
        "# my keys\nANTHROPIC_API_KEY=sk-ant-kept\n"
        f"OPENAI_API_KEY={KEY}\nCLAWBOT_TELEGRAM_TOKEN={telegram.token}\n"
    )
    assert (home / "clawbot.toml").read_text() == (
        '# my settings\nmodel = "openai/gpt-4o"  # the big one\nmax_tool_rounds = 5\n'
        'allowed_senders = ["slack:U0123ABCD", "telegram:1001"]\ndm_policy = "allowlist"\n\n'
        '[peer_groups.team]\nagents = ["main"]\n'
    )


async def test_enter_keeps_what_an_earlier_run_wrote(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    await onboarded_on_telegram(home, tmp_path, telegram, provider)
    written = (home / ".env").read_text(), (home / "clawbot.toml").read_text()

    await onboarded_on_telegram(
        home, tmp_path, telegram, provider, keys=("",), tokens=("",), policy=b"", allowed=b""
    )

    assert ((home / ".env").read_text(), (home / "clawbot.toml").read_text()) == written


@pytest.mark.parametrize("typed", [b"\x03", b"\x04"], ids=["ctrl-c", "eof"])
async def test_stopping_half_way_leaves_the_files_as_they_were(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin, typed: bytes
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("# mine\nOPENAI_API_KEY=sk-old\n")
    steps = model_steps(KEY)
    steps += [
        (b"", b"[telegram]: "),
        (b"\r", b"(hidden): "),
        (telegram.token.encode() + b"\r", b"DM policy"),
        (typed, b"Stopped: nothing was written."),
    ]
    env = onboard_env(home, provider, **telegram_env(telegram))
    await asyncio.to_thread(typed_steps, env, tmp_path, steps, ("onboard",))

    assert (home / ".env").read_text() == "# mine\nOPENAI_API_KEY=sk-old\n"
    assert not (home / "clawbot.toml").exists()
    assert sorted(path.name for path in home.iterdir()) == [".env"]  # no temporary left


async def test_discord_s_token_is_checked_with_users_me_and_the_bot_named(
    tmp_path: Path, provider: OpenAIStandin
) -> None:
    harness = DiscordHarness()
    await harness.start()
    try:
        steps = model_steps(KEY)
        steps += [
            (b"", b"[telegram]: "),
            (b"discord\r", b"(hidden): "),
            (harness.server.token.encode() + b"\r", b"ok: Discord knows this bot as"),
            *access_steps(b"pairing", b"-"),
        ]
        env = onboard_env(
            tmp_path / "home", provider, CLAWBOT_DISCORD_API_BASE=harness.server.api_base
        )
        shown = (await asyncio.to_thread(typed_steps, env, tmp_path, steps, ("onboard",))).decode()
    finally:
        await harness.server.stop()

    assert "ok: Discord knows this bot as claw_bot (Claw Bot)." in shown
    assert ("GET", "/api/v10/users/@me", None) in harness.server.requests
    written = dotenv_values(tmp_path / "home" / ".env")
    assert written["CLAWBOT_DISCORD_TOKEN"] == harness.server.token


async def test_slack_shows_the_manifest_then_checks_both_tokens(
    tmp_path: Path, provider: OpenAIStandin
) -> None:
    from clawbot.setup.platforms import slack_manifest

    harness = SlackHarness()
    await harness.start()
    try:
        steps = model_steps(KEY)
        steps += [
            (b"", b"[telegram]: "),
            (b"slack\r", b"Bot User OAuth Token (hidden): "),
            (harness.standin.bot_token.encode() + b"\r", b"connections:write) (hidden): "),
            (harness.standin.app_token.encode() + b"\r", b"ok: Slack knows this bot as"),
            *access_steps(b"allowlist", b"U0123ABCD"),
        ]
        env = onboard_env(
            tmp_path / "home", provider, CLAWBOT_SLACK_API_BASE=harness.standin.api_base
        )
        shown = (await asyncio.to_thread(typed_steps, env, tmp_path, steps, ("onboard",))).decode()
    finally:
        await harness.stop()

    assert slack_manifest().replace("\n", "\r\n") in shown  # the terminal ends lines so
    assert [method for method, _ in harness.standin.api_calls] == [
        "auth.test",
        "apps.connections.open",
    ]
    assert harness.standin.bot_token not in shown and harness.standin.app_token not in shown
    written = dotenv_values(tmp_path / "home" / ".env")
    assert written["CLAWBOT_SLACK_BOT_TOKEN"] == harness.standin.bot_token
    assert written["CLAWBOT_SLACK_APP_TOKEN"] == harness.standin.app_token


async def test_clawbot_run_serves_telegram_with_what_onboard_wrote(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    await onboarded_on_telegram(home, tmp_path, telegram, provider, policy=b"pairing")
    env = onboard_env(home, provider, **telegram_env(telegram), CLAWBOT_STREAMING="off")
    process = await asyncio.create_subprocess_exec(
        *CLAWBOT, "run", env=env, cwd=tmp_path, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert process.stderr is not None
        await asyncio.wait_for(logged(process.stderr, b"telegram: receiving messages"), 60)
        await telegram.inject_message("hello", sender_id="1001")  # listed: allowed
        sent = await telegram.wait_sent(1, timeout=30)
    finally:
        process.terminate()
        await process.wait()

    assert sent[0].text == "echo: hello"
    assert provider.requests[-1]["messages"][-1]["content"] == "hello"


async def logged(stream: asyncio.StreamReader, marker: bytes) -> None:
    seen = b""
    while marker not in seen:
        line = await stream.readline()
        assert line, "clawbot run ended early:\n" + seen.decode()
        seen += line


def test_non_interactive_onboard_takes_options_and_the_environment(
    tmp_path: Path, provider: OpenAIStandin
) -> None:
    async def serve() -> None:
        harness = DiscordHarness()
        await harness.start()
        try:
            env = onboard_env(
                tmp_path / "home",
                provider,
                OPENAI_API_KEY=KEY,
                CLAWBOT_DISCORD_TOKEN=harness.server.token,
                CLAWBOT_DISCORD_API_BASE=harness.server.api_base,
            )
            args = ["onboard", "--non-interactive", "-p", "discord", "--dm-policy", "allowlist"]
            args += ["--allow", "112233445566778899"]
            done = await asyncio.to_thread(
                subprocess.run, CLAWBOT + args, env=env, cwd=tmp_path, capture_output=True
            )
            assert done.returncode == 0, done.stderr.decode()
            assert harness.server.token not in (done.stdout + done.stderr).decode()
        finally:
            await harness.server.stop()

    asyncio.run(serve())

    assert (tmp_path / "home" / "clawbot.toml").read_text() == (
        'model = "openai/gpt-4o-mini"\ndm_policy = "allowlist"\n'
        'allowed_senders = ["discord:112233445566778899"]\n'
    )
    assert set(dotenv_values(tmp_path / "home" / ".env")) == {
        "OPENAI_API_KEY",
        "CLAWBOT_DISCORD_TOKEN",
    }


def test_non_interactive_onboard_without_a_token_names_what_to_set(
    tmp_path: Path, provider: OpenAIStandin
) -> None:
    env = onboard_env(tmp_path / "home", provider, OPENAI_API_KEY=KEY)
    done = subprocess.run(
        [*CLAWBOT, "onboard", "--non-interactive", "-p", "telegram"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 2
    assert "set CLAWBOT_TELEGRAM_TOKEN in the environment or .env" in done.stderr
    assert not (tmp_path / "home" / ".env").exists()


async def test_a_token_that_cannot_be_checked_may_be_kept_unchecked(
    tmp_path: Path, provider: OpenAIStandin
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    home = tmp_path / "home"
    steps = model_steps(KEY)
    steps += [
        (b"", b"[telegram]: "),
        (b"\r", b"(hidden): "),
        (b"123:unchecked\r", b"Type keep to use it unchecked"),
        (b"keep\r", b"3. Who may talk to it"),
        *access_steps(b"", b""),
    ]
    env = onboard_env(home, provider, CLAWBOT_TELEGRAM_API_BASE=f"http://127.0.0.1:{port}/bot")
    shown = (await asyncio.to_thread(typed_steps, env, tmp_path, steps, ("onboard",))).decode()

    assert "Not checked: could not ask Telegram (ClientConnectorError)" in shown
    assert dotenv_values(home / ".env")["CLAWBOT_TELEGRAM_TOKEN"] == "123:unchecked"


async def test_after_a_refusal_enter_no_longer_keeps_the_token_that_was_set(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text(f"CLAWBOT_TELEGRAM_TOKEN={WRONG_TOKEN}\n")
    steps = model_steps(KEY)
    steps += [
        (b"", b"[telegram]: "),
        (b"\r", b"bot token \xe2\x80\x94 Enter keeps the one set (hidden): "),
        (b"\r", b"Rejected"),
        (b"", b"bot token (hidden): "),
        (telegram.token.encode() + b"\r", b"ok: Telegram knows this bot as"),
        *access_steps(b"", b""),
    ]
    env = onboard_env(home, provider, **telegram_env(telegram))
    await asyncio.to_thread(typed_steps, env, tmp_path, steps, ("onboard",))

    assert dotenv_values(home / ".env")["CLAWBOT_TELEGRAM_TOKEN"] == telegram.token


async def test_a_setting_the_environment_would_override_is_pointed_out(
    tmp_path: Path, telegram: TelegramHarness, provider: OpenAIStandin
) -> None:
    steps = model_steps(KEY)
    steps += [
        (b"", b"[telegram]: "),
        (b"\r", b"(hidden): "),
        (telegram.token.encode() + b"\r", b"ok: Telegram knows this bot as"),
        *access_steps(b"open", b""),
    ]
    env = onboard_env(
        tmp_path / "home", provider, CLAWBOT_DM_POLICY="pairing", **telegram_env(telegram)
    )
    shown = (await asyncio.to_thread(typed_steps, env, tmp_path, steps, ("onboard",))).decode()

    assert "Note: CLAWBOT_DM_POLICY set in the environment or ./.env will override" in shown
    assert "CLAWBOT_MODEL" not in shown


def test_doctor_finds_the_key_and_token_in_the_home_s_env_and_shows_neither(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text(f"OPENAI_API_KEY={KEY}\nCLAWBOT_TELEGRAM_TOKEN=123:{KEY[3:]}\n")
    done = subprocess.run(
        [*CLAWBOT, "doctor"],
        env=environment(home, None),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "ok       model openai/gpt-4o-mini: provider credentials are present" in done.stdout
    assert "ok       telegram: " in done.stdout
    assert KEY[3:] not in done.stdout + done.stderr
