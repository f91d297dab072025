"""``clawbot chat``: the agent in the terminal, through the console channel."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import HomeOption, ModelOption, adapter_class, fail, load, serving_lock

if TYPE_CHECKING:
    from clawbot.settings import Settings


def chat(
    model: ModelOption = None,
    home: HomeOption = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="conversation name; each has its own history"),
    ] = None,
) -> None:
    """Talk to the agent in the terminal (piped stdin: one message per line)."""
    from clawbot.providers import check_credentials, preload_in_background, wait_for_preload

    settings = load(model, home, console_session=session)
    preload_in_background()  # the bot's own start runs beside it (see run)
    if "log_level" not in settings.model_fields_set and sys.stdin.isatty() and sys.stderr.isatty():
        # A person typing reads the conversation, not INFO lines between its messages.
        from clawbot.logs import setup_logging

        setup_logging("WARNING", settings.secret_values())
    import asyncio

    from clawbot.errors import ClawbotError

    try:
        check_credentials(settings.model)
    except ClawbotError as exc:
        fail(str(exc))
    try:
        with serving_lock(settings, "clawbot chat"):
            try:
                asyncio.run(_chat(settings))
            finally:
                wait_for_preload()
    except ClawbotError as exc:
        fail(str(exc), code=1)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


async def _chat(settings: Settings) -> None:
    from clawbot.app import Clawbot
    from clawbot.cli.chat_intake import ChatIntake

    adapter = adapter_class("console").from_settings(settings)
    async with await Clawbot.open(settings) as bot:
        bot.connect(adapter)
        await bot.start()
        await adapter.start(ChatIntake(bot.router))
        try:
            await adapter.wait_closed()
            await bot.scheduler.wait_idle()
        finally:
            await adapter.stop()
