"""``clawbot memory``: search, export, import, forget and reindex the memories."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load, with_store

if TYPE_CHECKING:
    from clawbot.store import Store


app = typer.Typer(
    help="Search, export, import and forget the agents' memories (docs/memory.md).",
    no_args_is_help=True,
)


@app.command("search")
def memory_search(
    query: Annotated[str, typer.Argument(help="words to look for")],
    agent: Annotated[str | None, typer.Option("--agent", help="only this agent's")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100)] = 10,
    home: HomeOption = None,
) -> None:
    """The memories that best match QUERY, best first (every agent's unless --agent)."""
    from clawbot.memory.records import MemoryHit, MemoryQuery
    from clawbot.scheduling.backlog import shorten

    if not query.strip():
        fail("the query is empty: give a few words to look for")
    # WARNING: an embedding model that fails is said (the search goes on full-text)
    settings = load(home=home, log_level="WARNING")
    namespaces = (agent,) if agent else None
    wanted = MemoryQuery(
        text=query, session_key="", agent_id="", namespaces=namespaces, limit=limit
    )

    async def search(store: Store) -> list[MemoryHit]:
        return await store.memories.search(wanted)

    hits = with_store(settings, search)
    for hit in hits:
        tags = f" [{', '.join(hit.memory.tags)}]" if hit.memory.tags else ""
        print(f"{hit.memory.ref}{tags}: {shorten(hit.memory.text, 200)}")
    if not hits:
        print(f"No memory matches {query!r}.", file=sys.stderr)


@app.command("export")
def memory_export(
    format_: Annotated[str, typer.Option("--format", help="jsonl (re-importable) or md")] = "jsonl",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="default: stdout")] = None,
    home: HomeOption = None,
) -> None:
    """Every memory, as JSON Lines (what `clawbot memory import` reads) or Markdown."""
    from clawbot.memory.files import to_jsonl, to_markdown
    from clawbot.memory.records import Memory

    if format_ not in ("jsonl", "md"):
        fail(f"unknown format {format_!r}: use jsonl or md")
    settings = load(home=home, log_level="ERROR")

    async def every(store: Store) -> list[Memory]:
        return await store.memories.list()

    memories = with_store(settings, every)
    if format_ == "md":
        text = to_markdown(memories)
    else:
        text = "".join(to_jsonl(memory) + "\n" for memory in memories)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}", code=1)
    print(f"Exported {len(memories)} memories to {output}.", file=sys.stderr)


@app.command("import")
def memory_import(
    file: Annotated[Path, typer.Argument(help="a file `clawbot memory export` wrote (jsonl)")],
    home: HomeOption = None,
) -> None:
    """Store the memories of FILE as they were (a memory under the same key is replaced).
    Broken lines are reported by number and left out; the good ones are kept."""
    from clawbot.memory.files import parse_jsonl

    settings = load(home=home, log_level="ERROR")
    try:
        with file.open(encoding="utf-8", errors="replace") as lines:
            parsed = parse_jsonl(lines, settings.memory_max_chars)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}", code=1)
    for problem in parsed.problems:
        print(f"{file}:{problem.line}: left out: {problem.message}", file=sys.stderr)

    async def restore(store: Store) -> int:
        return await store.memories.restore(parsed.memories)

    stored = with_store(settings, restore)
    left = len(parsed.problems)
    print(
        f"Imported {stored} {'memory' if stored == 1 else 'memories'} from {file}; "
        f"{left} {'line' if left == 1 else 'lines'} left out."
    )
    if parsed.problems:
        raise typer.Exit(1)


@app.command("forget")
def memory_forget(
    key: Annotated[str, typer.Argument(help="namespace:key (a bare key: the default agent's)")],
    home: HomeOption = None,
) -> None:
    """Delete one memory."""
    from clawbot.errors import MemoryInputError
    from clawbot.memory.records import split_ref

    settings = load(home=home, log_level="ERROR")
    try:
        namespace, name = split_ref(key, settings.agent)
    except MemoryInputError as exc:
        fail(str(exc))

    async def forget(store: Store) -> bool:
        return await store.memories.forget(namespace, name)

    if not with_store(settings, forget):
        fail(f"no memory {namespace}:{name} (`clawbot memory search` finds keys)", code=1)
    print(f"Forgot {namespace}:{name}.")


@app.command("reindex")
def memory_reindex(home: HomeOption = None) -> None:
    """Embed every memory again for semantic recall (CLAWBOT_MEMORY_EMBEDDINGS), e.g. after
    changing the model; a bot does it for the memories without vectors at its first search."""
    settings = load(home=home, log_level="ERROR")

    async def reindex(store: Store) -> int | None:
        return await store.memories.reindex()

    embedded = with_store(settings, reindex)
    if embedded is None:
        fail("semantic recall is off: set CLAWBOT_MEMORY_EMBEDDINGS (docs/memory.md)", code=1)
    print(f"Embedded {embedded} memories with {settings.memory_embeddings}.")
