"""What is wrong with the Slack settings, one line each, never showing a secret."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import SecretStr

from adapters.slack.commands import command_name_problem
from clawbot.settings import Settings


def settings_problems(settings: Settings) -> list[str]:
    """What is wrong with the Slack settings, one line each, never showing a secret."""
    problems = _check_token(
        "CLAWBOT_SLACK_BOT_TOKEN", settings.slack_bot_token, "xoxb-", "a bot token"
    )
    if settings.slack_mode == "socket":
        problems += _check_token(
            "CLAWBOT_SLACK_APP_TOKEN",
            settings.slack_app_token,
            "xapp-",
            "an app-level token (needed for Socket Mode)",
        )
    else:
        secret = settings.slack_signing_secret
        if secret is None or not secret.get_secret_value().strip():
            problems.append(
                "CLAWBOT_SLACK_SIGNING_SECRET is not set (needed for CLAWBOT_SLACK_MODE=http)"
            )
        elif _has_space(secret.get_secret_value()):
            problems.append("CLAWBOT_SLACK_SIGNING_SECRET contains spaces or line breaks")
        if not settings.slack_http_path.startswith("/"):
            problems.append("CLAWBOT_SLACK_HTTP_PATH must start with '/'")
    if urlsplit(settings.slack_api_base).scheme not in ("http", "https"):
        problems.append("CLAWBOT_SLACK_API_BASE must be an http(s) URL")
    command_problem = command_name_problem(settings.slack_command)
    if command_problem:
        problems.append(command_problem)
    return problems


def _check_token(env_name: str, token: SecretStr | None, prefix: str, what: str) -> list[str]:
    if token is None or not token.get_secret_value().strip():
        return [f"{env_name} is not set (it should be {what}, starting with {prefix})"]
    value = token.get_secret_value()
    if _has_space(value):
        return [f"{env_name} contains spaces or line breaks"]
    if not value.startswith(prefix):
        return [f"{env_name} does not look like {what}: it should start with {prefix}"]
    return []


def _has_space(value: str) -> bool:
    return any(ch.isspace() for ch in value)
