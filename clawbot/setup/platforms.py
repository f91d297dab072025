"""What each platform needs from a new operator, and its tokens checked against the platform.

One call per token, the platform's own "who am I": Telegram's ``getMe``, Discord's ``GET
/users/@me``, Slack's ``auth.test`` (and, for Socket Mode, ``apps.connections.open`` with
the app-level token), at the base URLs the settings name, so a self-hosted Bot API server or
a test's stand-in is asked instead. A refusal says only that the platform rejected the
token(s): never which part, never the token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from pydantic import SecretStr

from clawbot.errors import CheckFailed, CredentialsRejected
from clawbot.settings import Settings

PlatformName = Literal["telegram", "discord", "slack"]
PLATFORM_NAMES: tuple[PlatformName, ...] = ("telegram", "discord", "slack")
CHECK_TIMEOUT = 20.0
"""Seconds one check may take before the platform counts as unreachable."""


@dataclass(frozen=True)
class TokenField:
    """One secret a platform needs: the settings field, the variable it is written as, what
    to ask for and how such a token starts (an offline check before the platform is asked)."""

    setting: str
    env: str
    label: str
    prefix: str = ""


@dataclass(frozen=True)
class PlatformSetup:
    """A platform as the first run presents it."""

    name: PlatformName
    title: str
    tokens: tuple[TokenField, ...]
    how: str
    """Where the operator gets the token(s)."""
    ids: str
    """What a person's id looks like there, and where to find it."""
    id_pattern: re.Pattern[str]


PLATFORMS: dict[PlatformName, PlatformSetup] = {
    "telegram": PlatformSetup(
        name="telegram",
        title="Telegram",
        tokens=(TokenField("telegram_token", "CLAWBOT_TELEGRAM_TOKEN", "bot token"),),
        how="Talk to @BotFather in Telegram: /newbot, then copy the token it gives you.",
        ids="numeric Telegram user ids (@userinfobot tells you yours), e.g. 123456789",
        id_pattern=re.compile(r"\d{1,20}"),
    ),
    "discord": PlatformSetup(
        name="discord",
        title="Discord",
        tokens=(TokenField("discord_token", "CLAWBOT_DISCORD_TOKEN", "bot token"),),
        how="Developer Portal → New Application → Bot → Reset Token; on the same page "
        "enable Message Content Intent.",
        ids="Discord user ids (Developer Mode on, right-click a person → Copy User ID), "
        "e.g. 112233445566778899",
        id_pattern=re.compile(r"\d{15,21}"),
    ),
    "slack": PlatformSetup(
        name="slack",
        title="Slack",
        tokens=(
            TokenField(
                "slack_bot_token", "CLAWBOT_SLACK_BOT_TOKEN", "Bot User OAuth Token", "xoxb-"
            ),
            TokenField(
                "slack_app_token",
                "CLAWBOT_SLACK_APP_TOKEN",
                "app-level token (scope connections:write)",
                "xapp-",
            ),
        ),
        how="api.slack.com/apps → Create New App → From a manifest: paste the manifest "
        "below, install the app, then copy its Bot User OAuth Token (xoxb-…) and make an "
        "app-level token with the connections:write scope (Basic Information; xapp-…).",
        ids="Slack member ids (a person's profile → ⋮ → Copy member ID), e.g. U0123ABCD",
        id_pattern=re.compile(r"[UW][A-Z0-9]{2,20}"),
    ),
}


@dataclass(frozen=True)
class BotIdentity:
    """Who the platform says the token belongs to, to show the operator."""

    platform: PlatformName
    name: str


def token_problem(field: TokenField, value: str) -> str | None:
    """What is wrong with a token before the platform is asked, or None."""
    if not value.strip():
        return f"the {field.label} is empty"
    if any(char.isspace() for char in value.strip()):
        return f"the {field.label} has spaces in it"
    if field.prefix and not value.strip().startswith(field.prefix):
        return f"the {field.label} starts with {field.prefix}"
    return None


async def check_platform(
    platform: PlatformName, tokens: Mapping[str, SecretStr], settings: Settings
) -> BotIdentity:
    """Ask the platform who the token(s) (by settings field) belong to.

    CredentialsRejected when the platform refuses them, CheckFailed when it cannot be
    asked; neither names a token or says which one was wrong.
    """
    values = {name: secret.get_secret_value().strip() for name, secret in tokens.items()}
    title = PLATFORMS[platform].title
    timeout = aiohttp.ClientTimeout(total=CHECK_TIMEOUT)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            if platform == "telegram":
                return await _telegram(http, settings, values["telegram_token"])
            if platform == "discord":
                return await _discord(http, settings, values["discord_token"])
            return await _slack(
                http, settings, values["slack_bot_token"], values["slack_app_token"]
            )
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        # the exception's text may hold the URL, and Telegram's URL holds the token
        raise CheckFailed(f"could not ask {title} ({type(exc).__name__})") from None


def _rejected(title: str) -> CredentialsRejected:
    return CredentialsRejected(f"{title} rejected the token")


async def _json(response: aiohttp.ClientResponse, title: str) -> dict[str, Any]:
    try:
        body = await response.json(content_type=None)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise CheckFailed(f"{title} answered {response.status} without its API's JSON")
    return body


async def _telegram(http: aiohttp.ClientSession, settings: Settings, token: str) -> BotIdentity:
    async with http.get(f"{settings.telegram_api_base}{token}/getMe") as response:
        if response.status in (401, 404):  # 404: a token Telegram cannot even parse
            raise _rejected("Telegram")
        body = await _json(response, "Telegram")
    if not body.get("ok") or not isinstance(body.get("result"), dict):
        raise CheckFailed(f"Telegram answered {response.status}: not ok")
    me = body["result"]
    return BotIdentity("telegram", f"@{me.get('username', '?')} ({me.get('first_name', '')})")


async def _discord(http: aiohttp.ClientSession, settings: Settings, token: str) -> BotIdentity:
    headers = {"Authorization": f"Bot {token}"}
    async with http.get(f"{settings.discord_api_base}/users/@me", headers=headers) as response:
        if response.status == 401:
            raise _rejected("Discord")
        body = await _json(response, "Discord")
        if response.status != 200:
            raise CheckFailed(f"Discord answered {response.status}")
    discriminator = str(body.get("discriminator") or "0")
    name = str(body.get("username", "?")) + (f"#{discriminator}" if discriminator != "0" else "")
    shown = body.get("global_name")
    return BotIdentity("discord", f"{name} ({shown})" if shown else name)


async def _slack(
    http: aiohttp.ClientSession, settings: Settings, bot_token: str, app_token: str
) -> BotIdentity:
    """``auth.test`` with the bot token, then ``apps.connections.open`` with the app-level
    token (what Socket Mode calls first; the address it returns goes unused)."""
    me = await _slack_call(http, settings, "auth.test", bot_token)
    await _slack_call(http, settings, "apps.connections.open", app_token)
    return BotIdentity("slack", f"{me.get('user', '?')} in {me.get('team', '?')}")


async def _slack_call(
    http: aiohttp.ClientSession, settings: Settings, method: str, token: str
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with http.post(f"{settings.slack_api_base}{method}", headers=headers) as response:
        body = await _json(response, "Slack")
    if body.get("ok") is True:
        return body
    if response.status == 401 or body.get("error") in SLACK_REFUSALS:
        raise CredentialsRejected("Slack rejected the tokens")
    raise CheckFailed(f"Slack answered {method} with {body.get('error', 'an error')}")


SLACK_REFUSALS = {
    "not_authed",
    "invalid_auth",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
}
"""Slack's answers (HTTP 200, ``ok: false``) to a token it does not take."""


def slack_manifest(command: str = "/clawbot") -> str:
    """The Slack app manifest to paste at api.slack.com/apps (docs/platforms.md shows the
    same, for the default command)."""
    return SLACK_MANIFEST.replace("/clawbot", command)


SLACK_MANIFEST = """\
display_information:
  name: clawbot
features:
  bot_user: {display_name: clawbot, always_online: true}
  app_home: {messages_tab_enabled: true, messages_tab_read_only_enabled: false}
  slash_commands:
    - command: /clawbot          # must match CLAWBOT_SLACK_COMMAND
      description: Run a clawbot command (status, help, model, …)
      usage_hint: status
      should_escape: false
oauth_config:
  scopes:
    bot: [app_mentions:read, channels:history, groups:history, im:history, mpim:history,
          chat:write, files:read, files:write, users:read, commands]
settings:
  event_subscriptions:
    bot_events: [app_mention, message.channels, message.groups, message.im, message.mpim]
  interactivity: {is_enabled: true}   # approval buttons
  socket_mode_enabled: true
"""
