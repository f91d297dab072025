"""The first run's checks in-process (clawbot.setup): the model's through the scripted model
behind the real litellm call, the platforms' against their stand-ins. A refusal says only
that it was refused."""

from __future__ import annotations

import os

import pytest
from pydantic import SecretStr

from clawbot.errors import CheckFailed, CredentialsRejected
from clawbot.settings import Settings
from clawbot.setup.model_check import CHECK_PROMPT, check_model
from clawbot.setup.platforms import check_platform
from clawbot.testing import ScriptedFailure, ScriptedModel

from .standins.discord import DiscordHarness
from .standins.openai_api import OpenAIStandin
from .standins.slack import SlackHarness
from .standins.telegram import TelegramHarness


async def test_the_model_check_is_one_call_with_the_check_prompt() -> None:
    model = ScriptedModel(["ok"])
    with model.installed():
        await check_model(model.model_string)

    assert [request.last_user_text for request in model.requests] == [CHECK_PROMPT]


async def test_a_refused_key_is_credentials_rejected() -> None:
    model = ScriptedModel([ScriptedFailure("auth")])
    with model.installed(), pytest.raises(CredentialsRejected, match=r"rejected the key — "):
        await check_model(model.model_string)


async def test_a_provider_that_fails_otherwise_is_unreachable_and_not_retried() -> None:
    model = ScriptedModel([ScriptedFailure("server_error"), "ok"])
    with model.installed(), pytest.raises(CheckFailed, match="server error"):
        await check_model(model.model_string)

    assert len(model.requests) == 1


async def test_a_wrong_telegram_token_is_rejected_without_being_named() -> None:
    harness = TelegramHarness()
    await harness.start()
    try:
        settings = Settings(_env_file=None, **harness.settings_kwargs())  # type: ignore[call-arg]
        with pytest.raises(CredentialsRejected) as refused:
            await check_platform("telegram", {"telegram_token": SecretStr("1:wrong")}, settings)
    finally:
        await harness.stop()

    assert str(refused.value).startswith("Telegram rejected the token")
    assert "wrong" not in str(refused.value)


async def test_a_wrong_discord_token_is_rejected() -> None:
    harness = DiscordHarness()
    await harness.start()
    try:
        settings = Settings(_env_file=None, discord_api_base=harness.server.api_base)  # type: ignore[call-arg]
        with pytest.raises(CredentialsRejected, match=r"^Discord rejected the token"):
            await check_platform("discord", {"discord_token": SecretStr("x.y.z")}, settings)
    finally:
        await harness.server.stop()


@pytest.mark.parametrize("wrong", ["slack_bot_token", "slack_app_token"])
async def test_a_wrong_slack_token_is_rejected_without_saying_which(wrong: str) -> None:
    harness = SlackHarness()
    await harness.start()
    tokens = {
        "slack_bot_token": SecretStr(harness.standin.bot_token),
        "slack_app_token": SecretStr(harness.standin.app_token),
    }
    tokens[wrong] = SecretStr("xoxb-1-wrong" if wrong == "slack_bot_token" else "xapp-1-wrong")
    try:
        settings = Settings(_env_file=None, slack_api_base=harness.standin.api_base)  # type: ignore[call-arg]
        with pytest.raises(CredentialsRejected) as refused:
            await check_platform("slack", tokens, settings)
    finally:
        await harness.stop()

    assert refused.value.message == "Slack rejected the tokens"


async def test_a_platform_that_does_not_answer_is_unreachable() -> None:
    harness = TelegramHarness()
    await harness.start()
    settings = Settings(_env_file=None, **harness.settings_kwargs())  # type: ignore[call-arg]
    await harness.stop()

    with pytest.raises(CheckFailed, match=r"could not ask Telegram \(Client"):
        await check_platform("telegram", {"telegram_token": SecretStr(harness.token)}, settings)


async def test_the_key_typed_is_the_one_checked_and_is_not_left_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    standin = OpenAIStandin()
    standin.api_key = "sk-typed-key-000000000000"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEYS", "sk-listed-one,sk-listed-two")  # a ring, not checked
    with standin.running():
        monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
        typed = ("OPENAI_API_KEY", SecretStr(standin.api_key))
        await check_model("openai/gpt-4o-mini", typed)

    assert "OPENAI_API_KEY" not in os.environ
    assert os.environ["OPENAI_API_KEYS"] == "sk-listed-one,sk-listed-two"
