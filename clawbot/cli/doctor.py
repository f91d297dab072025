"""``clawbot doctor``: the checks of ``clawbot.cli.checks``, one line each, no secrets."""

from __future__ import annotations

import typer

from clawbot.cli.common import (
    HomeOption,
    ModelOption,
    adapter_class,
    adapter_names,
    load_home_env,
)


def doctor(model: ModelOption = None, home: HomeOption = None) -> None:
    """Check channel settings and token formats, the model key, home folder and database."""
    import asyncio

    from dotenv import load_dotenv

    from clawbot.cli.checks import all_ok, diagnose
    from clawbot.errors import ConfigError
    from clawbot.logs import redactor
    from clawbot.settings import load_settings

    load_dotenv(".env", override=False)
    redactor.add_from_environment()
    try:
        settings = load_settings(model=model, home=home)
        if load_home_env(settings):
            redactor.add_from_environment()
            settings = load_settings(model=model, home=home)
    except ConfigError as exc:
        print(redactor.redact(f"{'problem':<8} settings: {exc}"))
        raise typer.Exit(1) from None
    redactor.add(*settings.secret_values())
    channels = {name: adapter_class(name) for name in adapter_names() if name != "console"}
    checks = asyncio.run(diagnose(settings, channels))
    for check in checks:
        print(redactor.redact(check.line))
    raise typer.Exit(0 if all_ok(checks) else 1)
