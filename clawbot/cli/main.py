"""The ``clawbot`` command: the Typer app, one command group per module of this package.
Imports of the bot stay inside the commands so ``--help`` is instant."""

from __future__ import annotations

from typing import Annotated

import typer

from clawbot.cli import (
    agents,
    audit,
    chat,
    console,
    doctor,
    mcp,
    memory,
    onboard,
    pairing,
    run,
    schedule,
    sessions,
    usage,
)

app = typer.Typer(
    name="clawbot",
    help="LLM agents in Telegram, Discord, Slack and the terminal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: importing rich costs more than the 0.3 s budget
)


@app.callback(invoke_without_command=True)
def root(
    version: Annotated[bool, typer.Option("--version", help="print the version and exit")] = False,
) -> None:
    if version:
        from importlib.metadata import version as package_version

        print(package_version("clawbot"))
        raise typer.Exit(0)


app.command()(chat.chat)
app.add_typer(agents.app, name="agents")
app.command()(run.run)
app.command()(console.console)
app.command()(onboard.onboard)
app.command()(doctor.doctor)
app.add_typer(pairing.app, name="pairing")
app.add_typer(sessions.app, name="sessions")
app.add_typer(memory.app, name="memory")
app.add_typer(audit.app, name="audit")
app.add_typer(mcp.app, name="mcp")
app.add_typer(schedule.app, name="schedule")
app.command()(usage.usage)


def main() -> None:
    app()
