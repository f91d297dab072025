"""``clawbot audit``: read the audit records of tool calls."""

from __future__ import annotations

from typing import Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load, open_store

app = typer.Typer(
    help="Read the audit records of tool calls (docs/access.md#audit).", no_args_is_help=True
)


@app.command("tail")
def audit_tail(
    lines: Annotated[int, typer.Option("-n", "--lines", min=1, help="how many")] = 20,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="keep printing new ones")] = False,
    home: HomeOption = None,
) -> None:
    """The latest tool calls, oldest first; with -f, new ones as they happen (Ctrl-C stops).
    Read-only, so it works beside a running bot."""
    import asyncio
    import contextlib

    from clawbot.security.audit import audit_line

    async def tail() -> None:
        store = await open_store(settings)
        try:
            last = 0
            records = await store.audit.tail(lines)
            while True:
                for record in records:
                    print(audit_line(record), flush=True)
                    last = max(last, record.id or 0)
                if not follow:
                    return
                await asyncio.sleep(1)
                records = await store.audit.tail(1000, after=last)
        finally:
            await store.close()

    settings = load(home=home)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(tail())


@app.command("show")
def audit_show(
    trace: Annotated[str, typer.Option("--trace", help="a trace id (from `audit tail -n`)")],
    home: HomeOption = None,
) -> None:
    """Every tool call one message set off, across its subagents, as a tree."""
    import asyncio

    from clawbot.security.audit import render_trace
    from clawbot.subagents.tree import depth_below_root

    async def show() -> str:
        store = await open_store(settings)
        try:
            records = await store.audit.trace(trace)
            keys = {record.session_key for record in records}
            depths = {key: await depth_below_root(store.sessions, key) for key in keys}
            return render_trace(records, depths)
        finally:
            await store.close()

    settings = load(home=home)
    rendered = asyncio.run(show())
    if not rendered:
        fail(f"no audit record has the trace id {trace!r} (`clawbot audit tail` shows some)", 1)
    print(rendered)


@app.command("export")
def audit_export(
    format: Annotated[str, typer.Option("--format", help="jsonl (one record a line)")] = "jsonl",
    home: HomeOption = None,
) -> None:
    """Every audit record, oldest first, to standard output."""
    import asyncio
    import json

    if format != "jsonl":
        fail(f"unknown export format {format!r}: use --format jsonl", 2)

    async def export() -> None:
        store = await open_store(settings)
        try:
            for record in await store.audit.all():
                print(json.dumps(record.to_json(), ensure_ascii=False))
        finally:
            await store.close()

    settings = load(home=home)
    asyncio.run(export())
