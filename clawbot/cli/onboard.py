"""``clawbot onboard``: a first run that sets itself up. It asks for the model and its key
(checked with one cheap call), one platform and its token (checked against the platform:
the Telegram bot's name fetched, the Slack manifest shown), and who may talk to the bot;
then writes the secrets to the home's ``.env`` (readable by its owner alone) and the rest to
its ``clawbot.toml``. Nothing is written until every check passed; no secret is echoed;
running it again edits both files, never duplicates a line."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from clawbot.cli.common import HomeOption, fail, load

if TYPE_CHECKING:
    from clawbot.settings import Settings

T = TypeVar("T")
PLATFORMS = ("telegram", "discord", "slack", "none")
POLICIES = ("pairing", "allowlist", "open")


def _line(prompt: str) -> str:
    print(prompt, end="", flush=True)
    line = sys.stdin.readline()
    if not line:
        fail("onboard stopped: no more answers (nothing was written)")
    return line.strip()


def ask(question: str, default: str = "", choices: tuple[str, ...] = ()) -> str:
    """One answer (``default`` on Enter), asked again until it is one of ``choices``."""
    shown = f" [{default}]" if default else ""
    while True:
        answer = _line(f"{question}{shown}: ") or default
        if answer and (not choices or answer.lower() in choices):
            return answer.lower() if choices else answer
        print(f"  one of: {', '.join(choices)}" if choices else "  an answer is needed")


def ask_secret(question: str, *, keep: bool = False) -> str:
    """A secret, not echoed on a terminal; empty keeps the one set (when ``keep``)."""
    prompt = f"{question}{' (Enter keeps the one set)' if keep else ''}: "
    while True:
        answer = getpass.getpass(prompt).strip() if sys.stdin.isatty() else _line(prompt)
        if answer or keep:
            return answer
        print("  an answer is needed")


def _run(check: Coroutine[Any, Any, T]) -> T:
    from clawbot.cli.onboard_checks import OnboardError

    try:
        return asyncio.run(check)
    except OnboardError as exc:
        fail(f"{exc} (nothing was written)", code=1)


def onboard(home: HomeOption = None) -> None:
    """Set up the model, one platform and who may talk to the bot; writes the home's
    .env and clawbot.toml. Run it again to change them."""
    settings = load(home=home, log_level="ERROR")
    folder = settings.home.expanduser()
    print(f"Setting up clawbot in {folder} (run it again to change anything).")
    secrets: dict[str, str] = {}
    toml: dict[str, str | list[str]] = {}

    model = ask("Model (a litellm model string)", settings.model)
    key_name, key = _model_key(model)
    print(f"Checking {model} with one short call…")
    _run(_check_model(model, key_name, key))
    print("  the model answered.")
    toml["model"] = model
    if key_name and key != os.environ.get(key_name):
        secrets[key_name] = key

    platform = ask("Platform: telegram, discord, slack or none", "telegram", PLATFORMS)
    secrets.update(_platform(platform, settings))

    policy = ask(
        "Who may DM the bot: pairing (you approve each new person with `clawbot pairing`), "
        "allowlist (only the ids you list) or open",
        settings.dm_policy if settings.dm_policy in POLICIES else "pairing",
        POLICIES,
    )
    toml["dm_policy"] = policy
    if policy == "allowlist":
        listed = ask("Allowed senders, comma-separated (e.g. telegram:12345)")
        toml["allowed_senders"] = [s.strip() for s in listed.split(",") if s.strip()]

    from clawbot.cli.home_files import set_env_values, set_toml_values

    set_toml_values(folder / "clawbot.toml", toml)
    if secrets:
        set_env_values(folder / ".env", secrets)
    names = ", ".join(sorted(secrets)) or "none"
    print(f"Wrote {folder / 'clawbot.toml'} and {folder / '.env'} (secrets set: {names}).")
    print("Next: `clawbot doctor` checks it all, `clawbot run` serves the bot.")


def _model_key(model: str) -> tuple[str | None, str]:
    from clawbot.providers import KNOWN_PROVIDER_KEYS, missing_credentials, provider_of

    names = KNOWN_PROVIDER_KEYS.get(provider_of(model)) or tuple(missing_credentials(model))
    if not names:
        return None, ""
    name = names[0]
    current = next((os.environ[n] for n in names if os.environ.get(n)), "")
    typed = ask_secret(f"{name}", keep=bool(current))
    return name, typed or current


async def _check_model(model: str, key_name: str | None, key: str) -> None:
    from clawbot.cli.onboard_checks import check_model

    await check_model(model, key_name, key)


def _platform(platform: str, settings: Settings) -> dict[str, str]:
    from clawbot.cli import onboard_checks as checks

    if platform == "telegram":
        token = ask_secret("CLAWBOT_TELEGRAM_TOKEN (from @BotFather)")
        name = _run(checks.telegram_bot_name(token, settings.telegram_api_base))
        print(f"  Telegram knows the bot as {name}: message it there once `clawbot run` runs.")
        return {"CLAWBOT_TELEGRAM_TOKEN": token}
    if platform == "discord":
        token = ask_secret("CLAWBOT_DISCORD_TOKEN (Developer Portal → Bot)")
        name = _run(checks.discord_bot_name(token, settings.discord_api_base))
        print(f"  Discord knows the bot as {name}; turn on its Message Content intent.")
        return {"CLAWBOT_DISCORD_TOKEN": token}
    if platform == "slack":
        print("Create the Slack app from this manifest (api.slack.com/apps → From a manifest):")
        print(checks.SLACK_MANIFEST)
        bot = ask_secret("CLAWBOT_SLACK_BOT_TOKEN (xoxb-…)")
        app = ask_secret("CLAWBOT_SLACK_APP_TOKEN (xapp-…, connections:write)")
        name = _run(checks.slack_bot_name(bot, app, settings.slack_api_base))
        print(f"  Slack knows the bot as {name}.")
        return {"CLAWBOT_SLACK_BOT_TOKEN": bot, "CLAWBOT_SLACK_APP_TOKEN": app}
    return {}
