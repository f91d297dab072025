"""``clawbot console``: the web console alone, beside a serving process or none (it takes
no serving lock; it runs no turns). ``clawbot run --console`` serves it inside the bot,
where waiting approvals can be answered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load

if TYPE_CHECKING:
    from clawbot.console.context import ConsoleContext
    from clawbot.console.server import ConsoleServer
    from clawbot.settings import Settings

PortOption = Annotated[
    int | None,
    typer.Option("--port", min=0, max=65535, help="the console's port (CLAWBOT_CONSOLE_PORT)"),
]


def console_server(context: ConsoleContext, port: int | None) -> ConsoleServer:
    from clawbot.console.server import ConsoleServer

    settings = context.settings
    return ConsoleServer(
        context,
        host=settings.console_host,
        port=settings.console_port if port is None else port,
    )


def announce(url: str) -> None:
    """The login URL, printed once (stdout, never a log line: only its hash is stored)."""
    print(f"Web console: open {url}", flush=True)


def console(port: PortOption = None, home: HomeOption = None) -> None:
    """Serve the web console (sessions, subagents, audit, agents, memory, logs) on
    127.0.0.1 until SIGINT/SIGTERM; prints a login URL with a one-time token."""
    import asyncio

    from clawbot.errors import ClawbotError

    settings = load(home=home)
    try:
        asyncio.run(_console(settings, port))
    except ClawbotError as exc:
        fail(str(exc), code=1)


async def _console(settings: Settings, port: int | None) -> None:
    import asyncio
    import signal

    from clawbot.agents.home import prepare_home
    from clawbot.agents.registry import AgentRegistry
    from clawbot.cli.common import open_store
    from clawbot.console.context import ConsoleContext
    from clawbot.console.logtail import LogTail

    prepare_home(settings)
    store = await open_store(settings)
    try:
        agents = await AgentRegistry.open(store, settings.agents_dir)
        context = ConsoleContext(
            settings=settings, store=store, agents=agents, approvals=None, logs=LogTail()
        )
        server = console_server(context, port)
        announce(await server.start())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            await server.stop()
    finally:
        await store.close()
