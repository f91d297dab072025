"""``clawbot mcp``: the MCP servers of the settings, whether they start, and their tools."""

from __future__ import annotations

import typer

from clawbot.cli.common import HomeOption, load

app = typer.Typer(
    help="The MCP servers whose tools agents use (docs/mcp.md).", no_args_is_help=True
)


@app.command("list")
def mcp_list(home: HomeOption = None) -> None:
    """Each server: connected once now (beside a running bot too), its status and tools."""
    import asyncio

    from clawbot.logs import redactor
    from clawbot.mcp.plugin import probe

    settings = load(home=home)
    redactor.add(*settings.secret_values())
    if not settings.mcp_servers:
        print(
            "no MCP servers configured: add [mcp_servers.NAME] tables to clawbot.toml (docs/mcp.md)"
        )
        return
    statuses = asyncio.run(probe(settings))
    for status in statuses:
        state = "ok" if status.state == "connected" else status.state
        lines = [f"{status.name}  {state}  {status.transport}"]
        if status.error:
            lines.append(f"  error: {status.error}")
        if status.tools:
            lines.append(f"  tools: {', '.join(status.tools)}")
        lines += [f"  skipped: {line}" for line in status.skipped]
        print(redactor.redact("\n".join(lines)))
    raise typer.Exit(0 if all(s.state == "connected" for s in statuses) else 1)
