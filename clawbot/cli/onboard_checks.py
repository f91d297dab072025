"""What ``clawbot onboard`` checks before it writes anything: the model answers one cheap
call with the key given, and a platform's token is accepted by the platform (its bot's
name is what the person is shown). Each check returns what it found or raises an
OnboardError saying what was wrong, never the secret itself."""

from __future__ import annotations

from clawbot.errors import ClawbotError
from clawbot.redaction import redactor

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
"""The Slack app's manifest (docs/platforms.md shows the same; a test keeps them equal)."""


class OnboardError(ClawbotError):
    """A check of onboard failed: the key or token was refused, or could not be tried."""


def _said(exc: BaseException, *secrets: str) -> str:
    redactor.add(*secrets)
    text = " ".join(str(exc).split())[:300] or type(exc).__name__
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    return redactor.redact(text)


async def check_model(model: str, key_name: str | None, key: str) -> None:
    """One call of at most one token, with ``key`` as the provider's key."""
    from clawbot.providers import load_litellm

    litellm = load_litellm()
    try:
        await litellm.acompletion(
            model=model,
            messages=[{"role": "user", "content": "Say ok."}],
            max_tokens=1,
            timeout=60,
            **({"api_key": key} if key else {}),
        )
    except Exception as exc:
        raise OnboardError(
            f"the model {model} did not answer with that key: {_said(exc, key)}",
            hint=f"check the key{f' ({key_name})' if key_name else ''} and the model's name",
        ) from None


async def telegram_bot_name(token: str, api_base: str) -> str:
    """The bot's @username, as Telegram's getMe tells it."""
    from telegram import Bot

    try:
        async with Bot(token, base_url=api_base) as bot:
            me = await bot.get_me()
    except Exception as exc:
        raise OnboardError(
            f"Telegram refused the token: {_said(exc, token)}",
            hint="copy the token @BotFather gave again (123456:ABC-...)",
        ) from None
    return f"@{me.username}"


async def discord_bot_name(token: str, api_base: str) -> str:
    """The bot user's name, as Discord's ``/users/@me`` tells it."""
    import aiohttp

    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{api_base.rstrip('/')}/users/@me", headers={"Authorization": f"Bot {token}"}
            ) as response,
        ):
            if response.status != 200:
                raise OnboardError(
                    f"Discord refused the token (HTTP {response.status})",
                    hint="copy the bot's token again (Developer Portal → Bot → Reset Token)",
                )
            me = await response.json()
    except OnboardError:
        raise
    except Exception as exc:
        raise OnboardError(
            f"Discord could not be asked: {_said(exc, token)}",
            hint="check the network",
        ) from None
    return str(me.get("username", "?"))


async def slack_bot_name(bot_token: str, app_token: str, api_base: str) -> str:
    """The bot and its workspace, as Slack's ``auth.test`` tells them; the app-level token
    is tried by opening (and dropping) a Socket Mode connection URL."""
    from slack_sdk.web.async_client import AsyncWebClient

    try:
        who = await AsyncWebClient(token=bot_token, base_url=api_base).auth_test()
        await AsyncWebClient(token=app_token, base_url=api_base).apps_connections_open(
            app_token=app_token
        )
    except Exception as exc:
        raise OnboardError(
            f"Slack refused a token: {_said(exc, bot_token, app_token)}",
            hint="the bot token starts xoxb-, the app-level token xapp- (connections:write)",
        ) from None
    return f"{who.get('user', '?')} in {who.get('team', '?')}"
