"""The platforms' tokens, endpoints and modes: Telegram, Discord and Slack."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class PlatformSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    telegram_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_TELEGRAM_TOKEN", "TELEGRAM_BOT_TOKEN")
    )
    telegram_api_base: str = "https://api.telegram.org/bot"
    telegram_file_base: str = "https://api.telegram.org/file/bot"
    telegram_mode: Literal["polling", "webhook"] = "polling"
    telegram_webhook_url: str = ""
    telegram_webhook_listen: str = "127.0.0.1"
    telegram_webhook_port: int = Field(default=8443, ge=1, le=65535)
    telegram_webhook_path: str = "/telegram"
    telegram_webhook_secret: SecretStr | None = None

    discord_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_DISCORD_TOKEN", "DISCORD_BOT_TOKEN")
    )
    discord_api_base: str = "https://discord.com/api/v10"
    discord_catch_up_hours: float = Field(
        default=24.0,
        ge=0,
        description="on start, fetch Discord messages missed while offline (Discord never "
        "redelivers) from active conversations, up to this many hours old; 0 turns it off",
    )

    slack_bot_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN")
    )
    slack_app_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_SLACK_APP_TOKEN", "SLACK_APP_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None,
        validation_alias=_env("CLAWBOT_SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET"),
    )
    slack_api_base: str = "https://slack.com/api/"
    slack_mode: Literal["socket", "http"] = "socket"
    slack_http_host: str = "127.0.0.1"
    slack_http_port: int = Field(default=3000, ge=1, le=65535)
    slack_http_path: str = "/slack/events"
    slack_command: str = "/clawbot"
