"""What every command group shares: the options, settings loading, one-line failures, the
adapters by entry point, the serving lock and the store. Imports stay inside the functions so
``--help`` is instant."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from clawbot.channels.interface import Adapter
    from clawbot.settings import Settings
    from clawbot.store import Store


T = TypeVar("T")
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="litellm model string, e.g. openai/gpt-4o-mini (CLAWBOT_MODEL)"
    ),
]
HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="folder for the database and workspace (CLAWBOT_HOME)"),
]


def fail(message: str, code: int = 2) -> NoReturn:
    """One clear line on stderr, no traceback."""
    print(f"clawbot: {message}", file=sys.stderr, flush=True)
    raise typer.Exit(code)


def load(model: str | None = None, home: Path | None = None, **overrides: object) -> Settings:
    from dotenv import load_dotenv

    from clawbot.errors import ConfigError
    from clawbot.logs import setup_logging
    from clawbot.settings import load_settings

    # Provider keys in .env must reach litellm, which reads os.environ.
    load_dotenv(".env", override=False)
    try:
        settings = load_settings(model=model, home=home, **overrides)
        if load_home_env(settings):
            settings = load_settings(model=model, home=home, **overrides)
    except ConfigError as exc:
        fail(str(exc))
    setup_logging(settings.log_level, settings.secret_values())
    return settings


def load_home_env(settings: Settings) -> bool:
    """Put the home's ``.env`` (``clawbot onboard`` writes it) into the environment, below
    the variables already set and the current folder's ``.env``; whether there was one."""
    from dotenv import load_dotenv

    path = settings.home.expanduser() / ".env"
    if not path.is_file() or path.resolve() == Path(".env").resolve():
        return False
    load_dotenv(path, override=False)
    return True


def adapter_names() -> list[str]:
    from importlib.metadata import entry_points

    return sorted(entry.name for entry in entry_points(group="clawbot.adapters"))


def adapter_class(name: str) -> type[Adapter]:
    """Adapters register under the ``clawbot.adapters`` entry point group, so core never
    imports them by name (third-party channels plug in the same way). Only the adapters in
    use are imported: each platform library costs start-up time."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="clawbot.adapters", name=name):
        loaded: type[Adapter] = entry.load()
        return loaded
    fail(f"no channel adapter named {name!r} is installed (known: {', '.join(adapter_names())})")


def serving_lock(settings: Settings, command: str) -> AbstractContextManager[object]:
    """On SQLite, the lock that makes this the one process serving the home's database. On
    PostgreSQL none: several processes may serve one database (docs/postgres.md), and the
    platform connections allowed once per bot are held by a leader lock each
    (``clawbot.cli.leadership``)."""
    from contextlib import nullcontext

    from clawbot.cli.serving import ServingLock
    from clawbot.store import serves_alone

    if not serves_alone(settings):
        return nullcontext()
    return ServingLock.acquire(settings.db_path, command)


def with_store(settings: Settings, work: Callable[[Store], Awaitable[T]]) -> T:
    """``work`` on the opened store, closed after; a store error is one clear line."""
    import asyncio

    from clawbot.errors import ClawbotError

    async def run() -> T:
        store = await open_store(settings)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except ClawbotError as exc:
        fail(str(exc), code=1)


async def open_store(settings: Settings) -> Store:
    """The home's store; a store that cannot be opened is one clear line."""
    from clawbot.errors import ClawbotError
    from clawbot.memory.embeddings import configured_embedder
    from clawbot.store import open_store

    try:
        # the embedding model loads at its first use
        return await open_store(settings, configured_embedder(settings))
    except ClawbotError as exc:
        fail(str(exc), code=1)
