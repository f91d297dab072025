"""The console's first run: when no platform is configured, the sessions page points
here, and this form does what ``clawbot onboard`` does (the same checks, the same files):
the model and its key checked with one call, one platform's token checked against the
platform, who may DM the bot; nothing is written until every check passed, and no secret
is shown back. The serving process reads the files at its next start."""

from __future__ import annotations

from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.operator import audit_change
from clawbot.console.rendering import render
from clawbot.errors import ClawbotError
from clawbot.settings import Settings
from clawbot.setup.answers import OnboardAnswers, parse_senders
from clawbot.setup.home_files import env_values, write_answers
from clawbot.setup.model_check import check_model, key_names
from clawbot.setup.platforms import PLATFORMS as SETUPS
from clawbot.setup.platforms import check_platform, slack_manifest

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
        manifest=slack_manifest(context.settings.slack_command),
    )


async def _checked(settings: Settings, values: dict[str, str]) -> tuple[OnboardAnswers, str]:
    """The answers, once the model and the platform took the key and token(s), and what
    the platform calls the bot; a ClawbotError (CredentialsRejected, CheckFailed, a bad
    sender) if not. The checks and the answers are ``clawbot onboard``'s own."""
    model = values["model"]
    names = key_names(model)
    key = (names[0], SecretStr(values["key"])) if names and values["key"] else None
    await check_model(model, key)
    platform = values["platform"]
    if platform == "none":
        policy = values["policy"]
        answers = OnboardAnswers(model=model, provider_key=key, platform=None, dm_policy=policy)  # type: ignore[arg-type]
        return answers, ""
    setup = SETUPS[platform]  # type: ignore[index]
    given = [values["token"], values["app_token"]]
    tokens = {f.setting: SecretStr(v) for f, v in zip(setup.tokens, given, strict=False)}
    identity = await check_platform(setup.name, tokens, settings)
    listed = values["allowed"] if values["policy"] == "allowlist" else ""
    answers = OnboardAnswers(
        model=model,
        provider_key=key,
        platform=setup.name,
        tokens=tokens,
        dm_policy=values["policy"],  # type: ignore[arg-type]
        allowed_senders=parse_senders(setup.name, listed),
    )
    return answers, f"{setup.title}'s {identity.name}"


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
            answers, bot = await _checked(context.settings, values)
        except ClawbotError as exc:
            problem = f"{exc.message} — nothing was written."
    if problem:
        return render(
            request,
            "setup.html",
            400,
            values=shown,
            problem=problem,
            done="",
            manifest=slack_manifest(context.settings.slack_command),
        )
    home = context.settings.home.expanduser()
    write_answers(home, answers)
    secrets = list(env_values(answers))  # names only: no secret is shown back
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
        manifest=slack_manifest(context.settings.slack_command),
    )


routes = [Route("/setup", setup_page), Route("/setup", save_setup, methods=["POST"])]
