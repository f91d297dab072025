"""The console's first run: when no platform is configured, the sessions page points
here, and this form does what ``clawbot onboard`` does (the same checks, the same files):
the model and its key checked with one call, one platform's token checked against the
platform, who may DM the bot; nothing is written until every check passed, and no secret
is shown back. The serving process reads the files at its next start."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.cli import home_files, onboard_checks
from clawbot.console.context import ConsoleContext
from clawbot.console.operator import audit_change
from clawbot.console.rendering import render
from clawbot.providers import KNOWN_PROVIDER_KEYS, provider_of
from clawbot.settings import Settings

PLATFORMS = ("telegram", "discord", "slack", "none")
POLICIES = ("pairing", "allowlist", "open")


def configured(settings: Settings) -> bool:
    """Whether any platform has its token (else the console offers this page)."""
    return any(
        token is not None
        for token in (settings.telegram_token, settings.discord_token, settings.slack_bot_token)
    )


async def setup_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    return render(
        request,
        "setup.html",
        values={"model": context.settings.model, "platform": "telegram", "policy": "pairing"},
        problem="",
        done="",
        manifest=onboard_checks.SLACK_MANIFEST,
    )


async def _checked(settings: Settings, values: dict[str, str]) -> tuple[dict[str, str], str]:
    """The secrets to write, and what the platform calls the bot (OnboardError if not)."""
    model, key = values["model"], values["key"]
    names = KNOWN_PROVIDER_KEYS.get(provider_of(model), ())
    await onboard_checks.check_model(model, names[0] if names else None, key)
    secrets = {names[0]: key} if names and key else {}
    platform, token = values["platform"], values["token"]
    if platform == "telegram":
        name = await onboard_checks.telegram_bot_name(token, settings.telegram_api_base)
        return {**secrets, "CLAWBOT_TELEGRAM_TOKEN": token}, f"Telegram's {name}"
    if platform == "discord":
        name = await onboard_checks.discord_bot_name(token, settings.discord_api_base)
        return {**secrets, "CLAWBOT_DISCORD_TOKEN": token}, f"Discord's {name}"
    if platform == "slack":
        app = values["app_token"]
        name = await onboard_checks.slack_bot_name(token, app, settings.slack_api_base)
        tokens = {"CLAWBOT_SLACK_BOT_TOKEN": token, "CLAWBOT_SLACK_APP_TOKEN": app}
        return {**secrets, **tokens}, f"Slack's {name}"
    return secrets, ""


async def save_setup(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    form = await request.form()
    fields = ("model", "key", "platform", "token", "app_token", "policy", "allowed")
    values = {name: str(form.get(name, "")).strip() for name in fields}
    shown = {k: v for k, v in values.items() if k not in ("key", "token", "app_token")}
    if values["platform"] not in PLATFORMS or values["policy"] not in POLICIES:
        problem = "Pick a platform and a DM policy from the lists."
    elif not values["model"]:
        problem = "Give the model (a litellm model string)."
    else:
        problem = ""
    if not problem:
        try:
            secrets, bot = await _checked(context.settings, values)
        except onboard_checks.OnboardError as exc:
            problem = f"{exc} — nothing was written."
    if problem:
        return render(
            request,
            "setup.html",
            400,
            values=shown,
            problem=problem,
            done="",
            manifest=onboard_checks.SLACK_MANIFEST,
        )
    home = context.settings.home.expanduser()
    toml: dict[str, home_files.TomlValue] = {
        "model": values["model"],
        "dm_policy": values["policy"],
    }
    if values["policy"] == "allowlist":
        toml["allowed_senders"] = [s.strip() for s in values["allowed"].split(",") if s.strip()]
    home_files.set_toml_values(home / "clawbot.toml", toml)
    if secrets:
        home_files.set_env_values(home / ".env", secrets)
    await audit_change(context, "setup", model=values["model"], platform=values["platform"])
    done = (
        f"Checked {values['model']}{f' and {bot}' if bot else ''}; wrote {home / 'clawbot.toml'}"
        f" and {home / '.env'} (secrets set: {', '.join(sorted(secrets)) or 'none'}). "
        "Restart clawbot (`clawbot run --console`) to serve with them."
    )
    return render(
        request,
        "setup.html",
        values=shown,
        problem="",
        done=done,
        manifest=onboard_checks.SLACK_MANIFEST,
    )


routes = [Route("/setup", setup_page), Route("/setup", save_setup, methods=["POST"])]
