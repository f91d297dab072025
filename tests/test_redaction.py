"""Secrets never leave: strings shaped like API keys and tokens, and the bot's own
secrets, are masked before any platform send and before any transcript write."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from clawbot.app import Clawbot
from clawbot.redaction import (
    CREDENTIAL_SHAPES,
    REDACTED,
    SECRET_SHAPES,
    CredentialShape,
    SecretRedactor,
)
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat

OPENAI_KEY = "sk-proj-" + "A1b2C3d4" * 5
SLACK_TOKEN = "xoxb-" + "1234567890-" * 3 + "abcdefABCDEF"

SHAPES = {
    "openai": OPENAI_KEY,
    "anthropic": "sk-ant-api03-" + "x9Y8z7W6" * 6,
    "stripe": "sk_live_" + "51Hx" * 8,
    "slack": SLACK_TOKEN,
    "slack app": "xapp-1-A0123456789-" + "1234" * 8,
    "telegram": "123456789:AAH" + "standinTOKEN" * 3,
    "discord": "MTA" + "x" * 23 + "." + "G" * 6 + "." + "y" * 30,
    "github": "ghp_" + "a1B2" * 9,
    "github fine-grained": "github_pat_" + "11ABC" * 10,
    "gitlab": "glpat-" + "abcDEF123456" * 2,
    "aws": "AKIA" + "ABCDEFGHIJ234567",
    "google": "AIza" + "Sy" + "A1b2C3d4E5" * 3 + "xyz",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n"
    "-----END RSA PRIVATE KEY-----",
}


@pytest.mark.parametrize("secret", SHAPES.values(), ids=SHAPES.keys())
def test_each_credential_shape_is_masked(secret: str) -> None:
    text = SecretRedactor().redact(f"here it is: {secret} (keep it safe)")

    assert secret not in text
    assert text == f"here it is: {REDACTED} (keep it safe)"


@pytest.mark.parametrize("shape", CREDENTIAL_SHAPES, ids=[s.name for s in CREDENTIAL_SHAPES])
@given(data=st.data())
def test_any_text_holding_a_credential_shape_is_masked_wherever_the_shapes_match(
    shape: CredentialShape, data: st.DataObject
) -> None:
    """The redactor looks for the shapes' anchors first and skips text holding none: no
    string a shape matches may be skipped that way."""
    text = data.draw(st.from_regex(re.compile(shape.pattern)))

    masked = SecretRedactor().redact(text)

    assert masked == SECRET_SHAPES.sub(REDACTED, text)
    assert REDACTED in masked


@pytest.mark.parametrize(
    "ordinary",
    [
        "scikit-learn and sk-learn are libraries",
        "commit 3f860e8a9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "call me at 10:30, or 12345:abc",
        "https://example.com/a/very/long/path/with/words/in/it",
    ],
)
def test_ordinary_text_is_left_alone(ordinary: str) -> None:
    redactor = SecretRedactor()

    assert redactor.redact(ordinary) is ordinary


async def test_a_reply_holding_an_api_key_reaches_the_chat_masked(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.add(f"Your key is {OPENAI_KEY}, use it well.")

    await chat.say("what was my key again?")

    assert channel.texts == [f"Your key is {REDACTED}, use it well."]


async def test_a_key_a_user_pasted_is_stored_masked(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.add("Noted.")

    await chat.say(f"my slack token is {SLACK_TOKEN}")

    stored = await bot.store.transcripts.load(f"{channel.name}:chat1", 0)
    assert [entry.text for entry in stored] == [f"my slack token is {REDACTED}", "Noted."]


async def test_a_tool_output_holding_a_token_is_stored_masked(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    (bot.workspace.root / ".env").write_text(f"OPENAI_API_KEY={OPENAI_KEY}\n")
    scripted.add(call("file_read", path=".env"), "It holds one key.")

    await chat.say("what is in .env?")

    stored = await bot.store.transcripts.load(f"{channel.name}:chat1", 0)
    rows = " ".join(entry.model_dump_json() for entry in stored)
    assert OPENAI_KEY not in rows
    assert f"OPENAI_API_KEY={REDACTED}" in rows


async def test_the_bots_own_secret_of_no_known_shape_is_masked_in_replies_and_transcripts(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    signing_secret = 'plain"secret\\of-any-shape'
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        slack_signing_secret=SecretStr(signing_secret),
        _env_file=None,  # type: ignore[call-arg]
    )
    scripted.add(f"The signing secret is {signing_secret}.")
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)

        await Chat(bot, channel).say("tell me the signing secret")

        stored = await bot.store.transcripts.load(f"{channel.name}:chat1", 0)
    assert channel.texts == [f"The signing secret is {REDACTED}."]
    assert stored[-1].text == f"The signing secret is {REDACTED}."
