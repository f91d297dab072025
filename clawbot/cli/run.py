"""``clawbot run``: serve the agent on the configured platforms until a signal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import (
    HomeOption,
    ModelOption,
    adapter_class,
    adapter_names,
    fail,
    load,
    serving_lock,
)
from clawbot.cli.console import PortOption

if TYPE_CHECKING:
    from clawbot.settings import Settings


ChannelOption = Annotated[
    list[str] | None,
    typer.Option(
        "--channel",
        "-c",
        help="run only this channel (repeatable); default: every configured channel",
    ),
]


def channels_to_run(settings: Settings, requested: list[str]) -> list[str]:
    """The channels ``clawbot run`` starts, or one clear error saying what to set."""
    from clawbot.cli.checks import CHANNEL_SETTINGS_HINT

    if requested:
        names = list(dict.fromkeys(name.strip().lower() for name in requested))
        for name in names:
            if name == "console":
                fail("the console channel is `clawbot chat`; `clawbot run` serves the platforms")
            problems = adapter_class(name).check_settings(settings)
            if problems:
                fail(f"{name} is not ready: {'; '.join(problems)}")
        return names
    names = [
        name
        for name in adapter_names()
        if name != "console" and adapter_class(name).is_configured(settings)
    ]
    if not names:
        fail(f"no channel is configured — {CHANNEL_SETTINGS_HINT}; `clawbot doctor` checks them")
    for name in names:
        problems = adapter_class(name).check_settings(settings)
        if problems:
            fail(f"{name} is not ready: {'; '.join(problems)}")
    return names


def run(
    channel: ChannelOption = None,
    model: ModelOption = None,
    home: HomeOption = None,
    console: Annotated[
        bool, typer.Option("--console", help="serve the web console too (docs/console.md)")
    ] = False,
    port: PortOption = None,
) -> None:
    """Serve the agent on Telegram, Discord and Slack until SIGINT/SIGTERM."""
    from clawbot.providers import check_credentials, preload_in_background, wait_for_preload

    settings = load(model, home)
    import asyncio

    from clawbot.errors import ClawbotError

    names = channels_to_run(settings, channel or [])
    # Before the database opens and the adapters start, beside them; not earlier: the
    # import and the start share one interpreter lock, so starting it before the settings
    # and the adapters' imports got the first reply no sooner and the adapters connected
    # 0.7 s later (bench_startup.py).
    preload_in_background()
    try:
        check_credentials(settings.model)
    except ClawbotError as exc:
        fail(str(exc))
    try:
        with serving_lock(settings, "clawbot run"):
            try:
                asyncio.run(_run(settings, names, console=console, port=port))
            finally:
                wait_for_preload()
    except ClawbotError as exc:
        fail(str(exc), code=1)


async def _run(
    settings: Settings, names: list[str], *, console: bool = False, port: int | None = None
) -> None:
    from clawbot.app import Clawbot
    from clawbot.cli.console import announce, console_server
    from clawbot.cli.service import serve
    from clawbot.console.context import ConsoleContext
    from clawbot.console.logtail import LogTail

    adapters = [adapter_class(name).from_settings(settings) for name in names]
    async with await Clawbot.open(settings) as bot:
        if not console:
            await serve(bot, adapters)
            return
        context = ConsoleContext(
            settings=settings,
            store=bot.store,
            agents=bot.agents,
            approvals=bot.approvals,
            logs=LogTail(),
        )
        server = console_server(context, port)
        announce(await server.start())
        try:
            await serve(bot, adapters)
        finally:
            await server.stop()
