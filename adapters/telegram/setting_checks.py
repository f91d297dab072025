"""What is wrong with the Telegram settings, before the bot starts and in the words of a start
that failed: each problem names the setting to fix."""

from __future__ import annotations

import re
from collections.abc import Callable

from telegram.error import BadRequest, InvalidToken, NetworkError, TelegramError

from adapters.telegram.intake import NotTheBotApi
from clawbot.errors import ClawbotError, ConfigError
from clawbot.settings import Settings

_TOKEN_RE = re.compile(r"\d{3,}:[A-Za-z0-9_-]{30,}")
_WEBHOOK_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")


def settings_problems(settings: Settings) -> list[str]:
    """What is wrong with the Telegram settings, one line each, never showing a secret."""
    problems: list[str] = []
    token = settings.telegram_token.get_secret_value() if settings.telegram_token else ""
    if not token:
        problems.append("CLAWBOT_TELEGRAM_TOKEN is not set (get one from @BotFather)")
    elif not _TOKEN_RE.fullmatch(token.strip()):
        problems.append(
            "CLAWBOT_TELEGRAM_TOKEN does not look like a bot token "
            "(expected digits, a colon and 30+ letters, digits, '-' or '_', from @BotFather)"
        )
    for env, url in (
        ("CLAWBOT_TELEGRAM_API_BASE", settings.telegram_api_base),
        ("CLAWBOT_TELEGRAM_FILE_BASE", settings.telegram_file_base),
    ):
        if not url.startswith(("http://", "https://")):
            problems.append(f"{env} must be an http(s) URL")
    if settings.telegram_mode == "webhook":
        problems.extend(_webhook_problems(settings))
    return problems


def _webhook_problems(settings: Settings) -> list[str]:
    problems: list[str] = []
    url = settings.telegram_webhook_url
    if not url:
        problems.append("CLAWBOT_TELEGRAM_WEBHOOK_URL is required in webhook mode")
    elif settings.telegram_api_base.startswith("https://api.telegram.org") and not (
        url.startswith("https://")
    ):
        problems.append("CLAWBOT_TELEGRAM_WEBHOOK_URL must be https: Telegram refuses http")
    if not settings.telegram_webhook_path.startswith("/"):
        problems.append("CLAWBOT_TELEGRAM_WEBHOOK_PATH must start with '/'")
    secret = settings.telegram_webhook_secret
    if secret is None or not secret.get_secret_value():
        problems.append(
            "CLAWBOT_TELEGRAM_WEBHOOK_SECRET is required in webhook mode, so forged "
            "updates are refused"
        )
    elif not _WEBHOOK_SECRET_RE.fullmatch(secret.get_secret_value()):
        problems.append(
            "CLAWBOT_TELEGRAM_WEBHOOK_SECRET may only contain letters, digits, '-' and '_' "
            "(1-256 characters)"
        )
    return problems


def start_error(exc: Exception, settings: Settings, scrub: Callable[[str], str]) -> ClawbotError:
    """What went wrong at start, in words that point at the setting to fix."""
    if isinstance(exc, NotTheBotApi):
        return ConfigError(
            f"CLAWBOT_TELEGRAM_API_BASE ({settings.telegram_api_base}) {exc.answer}: "
            "is it the Telegram Bot API?",
            hint="leave it unset for https://api.telegram.org/bot, or give your Bot API "
            "server's URL ending in /bot",
        )
    if isinstance(exc, InvalidToken):
        return ConfigError(
            "Telegram rejected the bot token",
            hint="check CLAWBOT_TELEGRAM_TOKEN (from @BotFather)",
        )
    if isinstance(exc, OSError):  # the webhook port
        return ConfigError(
            "telegram could not listen for the webhook on "
            f"{settings.telegram_webhook_listen}:{settings.telegram_webhook_port}"
            f": {exc.strerror or exc}",
            hint="choose a free port with CLAWBOT_TELEGRAM_WEBHOOK_PORT",
        )
    detail = scrub(exc.message if isinstance(exc, TelegramError) else str(exc))
    if isinstance(exc, BadRequest):  # (a NetworkError subclass in PTB)
        return ConfigError(
            f"Telegram refused to set up the bot: {detail}",
            hint="check CLAWBOT_TELEGRAM_WEBHOOK_URL and the other webhook settings"
            if settings.telegram_mode == "webhook"
            else "check the telegram settings",
        )
    if isinstance(exc, NetworkError):
        return ClawbotError(
            f"cannot reach the Telegram Bot API: {detail}",
            hint="check the network and CLAWBOT_TELEGRAM_API_BASE",
        )
    return ClawbotError(f"telegram could not start: {detail}", hint="check the telegram settings")
