"""``clawbot sessions``: the stored sessions, their subagents and conversations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load, open_store, with_store

if TYPE_CHECKING:
    from clawbot.store import Store


app = typer.Typer(help="Look at the stored sessions.", no_args_is_help=True)


@app.command("tree")
def sessions_tree(
    key: Annotated[
        str | None,
        typer.Argument(help="a session's key; without it, every session that has subagents"),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Show sessions and their subagents as a tree: agent, latest turn's status, turns.
    Read-only, so it works beside a running bot."""
    import asyncio

    from clawbot.messages import utcnow
    from clawbot.subagents.tree import family, render_tree, roots

    async def trees() -> list[str] | None:
        store = await open_store(settings)
        try:
            if key is None:
                tops = await roots(store.sessions)
            else:
                top = await store.sessions.get(key)
                if top is None:
                    return None
                tops = [top]
            now = utcnow()
            return [render_tree(await family(store, top), now) for top in tops]
        finally:
            await store.close()

    settings = load(home=home)
    rendered = asyncio.run(trees())
    if rendered is None:
        fail(f"no session has the key {key!r} (`clawbot sessions tree` lists the trees)", 1)
    print("\n\n".join(rendered) if rendered else "No session has subagents.")


@app.command("show")
def sessions_show(
    key: Annotated[str, typer.Argument(help="a session's key")],
    epoch: Annotated[
        int | None, typer.Option(help="which conversation (/new starts the next); default: now")
    ] = None,
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="one JSON object a message, for an export")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Print a conversation's messages as they were, the compacted ones too (marked
    "(compacted)"; in JSONL their meta holds "compacted"). Read-only."""
    from clawbot.messages import ToolResultBlock, TranscriptEntry
    from clawbot.store.records import COMPACTED_META

    async def read(store: Store) -> list[TranscriptEntry] | None:
        session = await store.sessions.get(key)
        if session is None:
            return None
        return await store.transcripts.load(key, session.epoch if epoch is None else epoch)

    settings = load(home=home)
    entries = with_store(settings, read)
    if entries is None:
        fail(f"no session has the key {key!r} (`clawbot sessions tree` lists some)", 1)
    for entry in entries:
        if jsonl:
            print(entry.model_dump_json())
            continue
        marker = " (compacted)" if COMPACTED_META in entry.meta else ""
        calls = "".join(f" [called {call.name}]" for call in entry.tool_calls)
        results = "".join(
            f" [{block.name} -> {block.content}]"
            for block in entry.content
            if isinstance(block, ToolResultBlock)
        )
        print(f"{entry.role}{marker}: {entry.text}{calls}{results}".rstrip())
