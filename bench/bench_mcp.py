"""An MCP tool call's overhead over a direct call.

    python bench/bench_mcp.py                 # 2,000 calls of each
    python bench/bench_mcp.py --calls 200

The same tool, ``add(a, b)``, called one call after another through the tool registry (what
a turn's tool call runs inside the gate: arguments validated, the call, the result as text):
- direct: an async function registered as a clawbot tool, in the process;
- MCP over stdio: ``toolbox__add`` of the test suite's MCP server (tests/mcp_servers/
  toolbox.py, the official SDK), a child process on its standard streams;
- MCP over streamable HTTP: the same server on a 127.0.0.1 port;
- the SDK alone: ``ClientSession.call_tool`` on the same stdio session, no clawbot around
  it, each call next to one through clawbot (so the machine's load hits both alike): what
  clawbot adds to the SDK, apart from what the protocol, the transport and the server cost.
Per call: p50 and p99 wall time, and the overhead (p50 less the direct call's p50).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import SecretStr

from clawbot.mcp.plugin import McpServers
from clawbot.messages import ToolCallBlock
from clawbot.routing.sessions import Session
from clawbot.settings import Settings
from clawbot.settings.mcp import McpServer
from clawbot.tools.registry import ToolContext, ToolRegistry, make_tool

TOOLBOX = ROOT / "tests" / "mcp_servers" / "toolbox.py"
TOKEN = "bench-token"


async def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


async def timed(calls: int, warmup: int, one: Callable[[int], Awaitable[object]]) -> list[float]:
    for i in range(warmup):
        await one(i)
    times = []
    for i in range(calls):
        start = time.perf_counter()
        await one(i)
        times.append(time.perf_counter() - start)
    return times


def through(
    registry: ToolRegistry, context: ToolContext, name: str
) -> Callable[[int], Awaitable[object]]:
    async def one(i: int) -> object:
        result = await registry.execute(
            ToolCallBlock(id=f"c{i}", name=name, arguments={"a": i, "b": 1}), context
        )
        assert not result.is_error and result.content == str(i + 1), result.content
        return result

    return one


def http_server() -> tuple[subprocess.Popen[bytes], str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(TOOLBOX), "http", str(listener.fileno())],
        pass_fds=[listener.fileno()],
        env={**os.environ, "TOOLBOX_TOKEN": TOKEN},
        stderr=subprocess.DEVNULL,
    )
    listener.close()
    return process, f"http://127.0.0.1:{port}/mcp"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    calls, warmup = args.calls, min(args.warmup, args.calls)

    process, url = http_server()
    home = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    settings = Settings(
        home=home,
        mcp_servers={
            "stdio": McpServer(command=sys.executable, args=(str(TOOLBOX), "stdio")),
            "http": McpServer(url=url, headers={"Authorization": SecretStr(f"Bearer {TOKEN}")}),
        },
        _env_file=None,  # type: ignore[call-arg]
    )
    registry = ToolRegistry([make_tool(add)])
    servers = McpServers(settings, registry)
    context = ToolContext(
        session=Session(key="bench:1", channel="bench", chat_id="1", agent_id="main"),
        workspace=home,
        settings=settings,
    )
    results: dict[str, list[float]] = {}
    try:
        await servers.start()
        for status in servers.statuses():
            assert status.state == "connected", status
        results["direct call"] = await timed(calls, warmup, through(registry, context, "add"))
        live = servers.connections[0]._live
        assert live is not None
        session = live.session

        async def sdk(i: int) -> object:
            return await session.call_tool("add", {"a": i, "b": 1})

        # one after the other on one session, so load on the machine hits both alike
        clawbot, alone = through(registry, context, "stdio__add"), sdk
        results["MCP over stdio"], results["the SDK alone (stdio)"] = [], []
        for i in range(warmup + calls):
            for name, one in (("MCP over stdio", clawbot), ("the SDK alone (stdio)", alone)):
                start = time.perf_counter()
                await one(i)
                if i >= warmup:
                    results[name].append(time.perf_counter() - start)
        results["MCP over streamable HTTP"] = await timed(
            calls, warmup, through(registry, context, "http__add")
        )
    finally:
        await servers.stop()
        process.kill()
        process.wait(30)

    direct = statistics.median(results["direct call"])
    print(f"{calls} calls of add(a, b) each, one after another")
    for name, times in results.items():
        times.sort()
        p50 = statistics.median(times)
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        over = "" if name == "direct call" else f"  overhead p50 {(p50 - direct) * 1000:.3f} ms"
        print(f"{name:<26} p50 {p50 * 1000:8.3f} ms  p99 {p99 * 1000:8.3f} ms{over}")
    stdio = statistics.median(results["MCP over stdio"])
    sdk_alone = statistics.median(results["the SDK alone (stdio)"])
    print(
        f"clawbot around the SDK (stdio p50 less the SDK alone): {(stdio - sdk_alone) * 1000:.3f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
