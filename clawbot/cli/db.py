"""``clawbot db``: the database's schema (``status``) and bringing it up to date
(``migrate``), on SQLite or PostgreSQL (``CLAWBOT_DATABASE_URL``, docs/postgres.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load

app = typer.Typer(
    help="The database: its schema and migrations (docs/postgres.md).", no_args_is_help=True
)
UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="a database URL (default: CLAWBOT_DATABASE_URL or the home's file)"),
]


def _url(url: str | None, home: Path | None) -> str:
    from clawbot.store import database_url

    return url or database_url(load(home=home))


@app.command("status")
def db_status(url: UrlOption = None, home: HomeOption = None) -> None:
    """Which database, its schema version and the migrations it lacks. Changes nothing."""
    import asyncio

    from clawbot.errors import ClawbotError
    from clawbot.store import schema_status

    try:
        status = asyncio.run(schema_status(_url(url, home)))
    except ClawbotError as exc:
        fail(str(exc), code=1)
    print(status.line())


@app.command("migrate")
def db_migrate(url: UrlOption = None, home: HomeOption = None) -> None:
    """Apply the migrations the database lacks (a bot's first start does it too)."""
    import asyncio

    from clawbot.errors import ClawbotError
    from clawbot.store import migrate_url

    try:
        before, after = asyncio.run(migrate_url(_url(url, home)))
    except ClawbotError as exc:
        fail(str(exc), code=1)
    applied = after.version - before.version
    print(f"applied {applied} migration(s); {after.line()}")


@app.command("copy")
def db_copy(
    source: Annotated[
        str, typer.Option("--from", help="the bot's database now, e.g. sqlite:///path")
    ],
    target: Annotated[
        str, typer.Option("--to", help="an empty database, e.g. postgresql://user@host/db")
    ],
) -> None:
    """Copy a bot (sessions, transcripts, jobs, agents, approvals, memory, audit) into an
    empty database, and verify the rows of every table were copied. Stop the bot first."""
    import asyncio

    from clawbot.errors import ClawbotError
    from clawbot.store import copy_database

    try:
        report = asyncio.run(copy_database(source, target))
    except ClawbotError as exc:
        fail(str(exc), code=1)
    print(f"copied and verified: {report.line()}")
