"""A real MCP server for the tests, on the official SDK: ``toolbox.py stdio`` speaks over
its standard streams; ``toolbox.py http FD`` serves streamable HTTP on the listening socket
FD its parent bound (127.0.0.1, a free port), so the parent connects without waiting for it
to start. Over HTTP every request must carry ``Authorization: Bearer $TOOLBOX_TOKEN``.

Its tools: ``add``, ``echo``, ``token_length`` (of the TOOLBOX_TOKEN it was given),
``environment_names``, ``grow`` (adds the tool ``extra`` and says so),
``wait_forever`` (a slow tool), ``crash`` (the process exits mid-call), ``fail`` (an error
result), ``get.time`` and ``get_time`` (two names one clawbot name cannot tell apart), and
``broken``, ``listed`` and ``long_xxx...``, listed only: a malformed input schema, one that
is not an object's, a name too long for the providers.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.fastmcp import Context, FastMCP

BROKEN_SCHEMA = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}


class Toolbox(FastMCP):
    async def list_tools(self) -> list[types.Tool]:
        listed = await super().list_tools()
        return [
            *listed,
            types.Tool(name="broken", inputSchema=BROKEN_SCHEMA),
            types.Tool(name="listed", inputSchema={"type": "array"}),
            types.Tool(name="long_" + "x" * 60, inputSchema={"type": "object"}),
        ]


server = Toolbox("toolbox", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def token_length() -> int:
    """How long the TOOLBOX_TOKEN this server was started with is."""
    return len(os.environ.get("TOOLBOX_TOKEN", ""))


@server.tool()
def environment_names() -> str:
    """The names of the variables in this server's environment."""
    return ",".join(sorted(os.environ))


@server.tool()
async def wait_forever() -> str:
    """Never answers."""
    await anyio.Event().wait()
    return "never"


@server.tool()
def crash() -> str:
    """The server's process dies while the call runs."""
    os._exit(3)


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the toolbox is out of order")


@server.tool()
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Adds the tool ``extra`` and tells the client its tools changed."""

    def extra() -> str:
        """A tool that was not there at first."""
        return "extra"

    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(name="get.time")
def get_dot_time() -> str:
    """The time, one way."""
    return "noon"


@server.tool(name="get_time")
def get_time() -> str:
    """The time, another way."""
    return "midday"


def bearer_required(app: Any, token: str) -> Any:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    if sys.argv[1] == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = bearer_required(server.streamable_http_app(), os.environ["TOOLBOX_TOKEN"])
    uvicorn.run(app, fd=int(sys.argv[2]), log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
