"""What is wrong with the Discord settings, one line each, never showing the token."""

from __future__ import annotations

import base64
import binascii
import re

from clawbot.settings import Settings

_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}")


def settings_problems(settings: Settings) -> list[str]:
    """What is wrong with the Discord settings, one line each."""
    problems: list[str] = []
    token = settings.discord_token.get_secret_value() if settings.discord_token else ""
    if not token.strip():
        problems.append(
            "CLAWBOT_DISCORD_TOKEN is not set (Discord developer portal → your app → Bot → "
            "Reset Token)"
        )
    elif token.startswith(("Bot ", "Bearer ")):
        problems.append("CLAWBOT_DISCORD_TOKEN must be the bare bot token, without a 'Bot ' prefix")
    elif token != token.strip() or any(c in token for c in "\"' \t"):
        problems.append("CLAWBOT_DISCORD_TOKEN contains spaces or quotes; paste only the token")
    elif not _TOKEN_SHAPE.fullmatch(token) or not _encodes_user_id(token.split(".")[0]):
        problems.append(
            "CLAWBOT_DISCORD_TOKEN does not look like a bot token (expected three "
            "dot-separated parts, the first encoding the bot's user id); an application "
            "id, client secret or public key will not work"
        )
    if not settings.discord_api_base.startswith(("http://", "https://")):
        problems.append("CLAWBOT_DISCORD_API_BASE must be an http(s) URL")
    return problems


def _encodes_user_id(segment: str) -> bool:
    """A bot token starts with the base64 of the bot's numeric user id."""
    try:
        decoded = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        return False
    return decoded.isdigit()
