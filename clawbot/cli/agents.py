"""``clawbot agents``: list, show and export the agent profiles."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load

if TYPE_CHECKING:
    from clawbot.agents.registry import AgentRegistry
    from clawbot.settings import Settings


app = typer.Typer(
    help="List, show and export the agent profiles.", no_args_is_help=True, add_completion=False
)


def _open_registry(settings: Settings, work: Callable[[AgentRegistry], Awaitable[None]]) -> None:
    """Run ``work`` on the registry as the bot would load it (the agents folder applied)."""
    import asyncio

    from clawbot.agents.home import prepare_home
    from clawbot.agents.registry import AgentRegistry
    from clawbot.errors import ClawbotError
    from clawbot.memory.embeddings import configured_embedder
    from clawbot.store import open_store

    async def run() -> None:
        prepare_home(settings)
        store = await open_store(settings, configured_embedder(settings))
        try:
            registry = await AgentRegistry.open(store, settings.agents_dir)
            for problem in registry.problems:
                print(f"clawbot: skipped {problem}", file=sys.stderr)
            await work(registry)
        finally:
            await store.close()

    try:
        asyncio.run(run())
    except ClawbotError as exc:
        fail(str(exc), code=1)


@app.command("list")
def agents_list(home: HomeOption = None) -> None:
    """One line per agent: id, model and description."""
    settings = load(home=home, log_level="ERROR")

    async def show(registry: AgentRegistry) -> None:
        specs = registry.all()
        width = max(len(spec.label) for spec in specs)
        for spec in specs:
            model = spec.model or f"{settings.model} (global)"
            default = "  [default]" if spec.agent_id == settings.agent else ""
            print(f"{spec.label:<{width}}  {model}  {spec.description}{default}")

    _open_registry(settings, show)


@app.command("show")
def agents_show(
    agent: Annotated[str, typer.Argument(help="the agent's id or name")],
    home: HomeOption = None,
) -> None:
    """Print one agent as TOML, as `agents export` would write it."""
    settings = load(home=home, log_level="ERROR")
    from clawbot.agents.files import agent_toml

    async def show(registry: AgentRegistry) -> None:
        spec = registry.exact(agent)
        if spec is None:
            close = ", ".join(s.agent_id for s in registry.suggest(agent))
            hint = f"did you mean {close}?" if close else "`clawbot agents list` shows them"
            fail(f"no agent is called {agent!r} — {hint}", code=1)
        record = registry.record(spec.agent_id)
        source = record.source if record else "builtin"
        print(f"# source: {source}")
        print(agent_toml(spec), end="")

    _open_registry(settings, show)


@app.command("export")
def agents_export(
    to: Annotated[
        Path | None,
        typer.Option("--to", help="folder to write <id>.toml files to (default: HOME/agents)"),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Write every agent to <folder>/<id>.toml, e.g. to commit them to Git."""
    settings = load(home=home, log_level="ERROR")
    target = to or settings.agents_dir

    async def export(registry: AgentRegistry) -> None:
        paths = await registry.export(target)
        for path in paths:
            print(path)
        print(f"exported {len(paths)} agents to {target}", file=sys.stderr)

    _open_registry(settings, export)
