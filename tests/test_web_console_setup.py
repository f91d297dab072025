"""The console's first run: with no platform configured the first page points to the set-up
form, which checks the model's key and the platform's token (the stand-ins of OpenAI and
Telegram) before it writes the home's files, as ``clawbot onboard`` does."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawbot.testing import ScriptedModel
from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import TelegramHarness
from tests.test_edge_telegram import harness

from .console_site import Site, console_for, console_settings, csrf_of, logged_in, site

__all__ = ["harness", "site"]

KEY = "sk-setup-" + "q7w8" * 6


@pytest.fixture
async def setup_site(
    tmp_path: Path, scripted: ScriptedModel, harness: TelegramHarness
) -> AsyncIterator[Site]:
    """The console of a bot whose Telegram is the stand-in (no token set yet)."""
    base = f"{harness.server.url}/bot"
    async with console_for(console_settings(tmp_path, scripted, telegram_api_base=base)) as s:
        yield s


@pytest.fixture
def providers(monkeypatch: pytest.MonkeyPatch, standin: OpenAIStandin) -> OpenAIStandin:
    monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    standin.script = ["ok"]
    return standin


def answers(harness: TelegramHarness, token: str, csrf: str) -> dict[str, str]:
    return {
        "model": "openai/gpt-4o-mini",
        "key": KEY,
        "platform": "telegram",
        "token": token,
        "policy": "allowlist",
        "allowed": "telegram:42",
        "csrf": csrf,
    }


async def test_the_first_page_of_an_unconfigured_bot_points_to_the_set_up(site: Site) -> None:
    async with logged_in(site) as client:
        page = await client.get("/")

    assert 'href="/setup"' in page.text


async def test_the_set_up_checks_the_key_and_token_then_writes_the_home_files(
    setup_site: Site, providers: OpenAIStandin, harness: TelegramHarness
) -> None:
    site = setup_site
    async with logged_in(site) as client:
        csrf = csrf_of((await client.get("/setup")).text)
        saved = await client.post("/setup", data=answers(harness, harness.token, csrf))

    home = site.bot.settings.home
    assert saved.status_code == 200, saved.text
    assert f"@{harness.server.bot_user['username']}" in saved.text
    assert KEY not in saved.text and harness.token not in saved.text
    assert [r.get("max_tokens") for r in providers.requests] == [1]
    assert (home / ".env").read_text().splitlines() == [
        f"OPENAI_API_KEY={KEY}",
        f"CLAWBOT_TELEGRAM_TOKEN={harness.token}",
    ]
    settings = tomllib.loads((home / "clawbot.toml").read_text())
    assert settings == {
        "model": "openai/gpt-4o-mini",
        "dm_policy": "allowlist",
        "allowed_senders": ["telegram:42"],
    }


async def test_a_token_the_platform_refuses_writes_nothing_and_is_not_shown(
    setup_site: Site, providers: OpenAIStandin, harness: TelegramHarness
) -> None:
    site = setup_site
    wrong = "123456:" + "W" * 35
    async with logged_in(site) as client:
        csrf = csrf_of((await client.get("/setup")).text)
        refused = await client.post("/setup", data=answers(harness, wrong, csrf))

    assert refused.status_code == 400
    assert "Telegram rejected the token" in refused.text and "nothing was written" in refused.text
    assert wrong not in refused.text and KEY not in refused.text
    assert not (site.bot.settings.home / ".env").exists()
