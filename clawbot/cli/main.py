"""The ``clawbot`` command. Imports stay inside the commands so ``--help`` is instant."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from clawbot.agents.registry import AgentRegistry
    from clawbot.channels.interface import Adapter
    from clawbot.cli.serving import ServingLock
    from clawbot.routing.pairing import PairingRequest
    from clawbot.settings import Settings
    from clawbot.store import Store

T = TypeVar("T")

app = typer.Typer(
    name="clawbot",
    help="LLM agents in Telegram, Discord, Slack and the terminal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: importing rich costs more than the 0.3 s budget
)

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
    except ConfigError as exc:
        fail(str(exc))
    setup_logging(settings.log_level, settings.secret_values())
    return settings


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


@app.command()
def chat(
    model: ModelOption = None,
    home: HomeOption = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="conversation name; each has its own history"),
    ] = None,
) -> None:
    """Talk to the agent in the terminal (piped stdin: one message per line)."""
    from clawbot.runtime.llm import check_credentials, preload_in_background, wait_for_preload

    preload_in_background()  # first: the first reply waits for litellm's import alone
    settings = load(model, home, console_session=session)
    if "log_level" not in settings.model_fields_set and sys.stdin.isatty() and sys.stderr.isatty():
        # A person typing reads the conversation, not INFO lines between its messages.
        from clawbot.logs import setup_logging

        setup_logging("WARNING", settings.secret_values())
    import asyncio

    from clawbot.errors import ClawbotError

    try:
        check_credentials(settings.model)
    except ClawbotError as exc:
        fail(str(exc))
    try:
        with serving_lock(settings, "clawbot chat"):
            try:
                asyncio.run(_chat(settings))
            finally:
                wait_for_preload()
    except ClawbotError as exc:
        fail(str(exc), code=1)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def serving_lock(settings: Settings, command: str) -> ServingLock:
    """The lock that makes this the one process serving the home's database."""
    from clawbot.cli.serving import ServingLock

    return ServingLock.acquire(settings.db_path, command)


async def _chat(settings: Settings) -> None:
    from clawbot.app import Clawbot
    from clawbot.cli.chat_intake import ChatIntake

    adapter = adapter_class("console").from_settings(settings)
    async with await Clawbot.open(settings) as bot:
        bot.connect(adapter)
        await bot.start()
        await adapter.start(ChatIntake(bot.router))
        try:
            await adapter.wait_closed()
            await bot.scheduler.wait_idle()
        finally:
            await adapter.stop()


@app.callback(invoke_without_command=True)
def root(
    version: Annotated[bool, typer.Option("--version", help="print the version and exit")] = False,
) -> None:
    if version:
        from importlib.metadata import version as package_version

        print(package_version("clawbot"))
        raise typer.Exit(0)


agents_app = typer.Typer(
    help="List, show and export the agent profiles.", no_args_is_help=True, add_completion=False
)
app.add_typer(agents_app, name="agents")


def _open_registry(settings: Settings, work: Callable[[AgentRegistry], Awaitable[None]]) -> None:
    """Run ``work`` on the registry as the bot would load it (the agents folder applied)."""
    import asyncio

    from clawbot.agents.registry import AgentRegistry
    from clawbot.errors import ClawbotError
    from clawbot.home import prepare_home
    from clawbot.store import open_store

    async def run() -> None:
        prepare_home(settings)
        store = await open_store(settings)
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


@agents_app.command("list")
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


@agents_app.command("show")
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


@agents_app.command("export")
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


ChannelOption = Annotated[
    list[str] | None,
    typer.Option(
        "--channel",
        "-c",
        help="run only this channel (repeatable); default: every configured channel",
    ),
]


def channels_to_run(settings: Settings, requested: list[str]) -> list[str]:
    """The channels ``clawbot run`` starts, or one clear error saying what to set."""
    from clawbot.cli.checks import CHANNEL_SETTINGS_HINT

    if requested:
        names = list(dict.fromkeys(name.strip().lower() for name in requested))
        for name in names:
            if name == "console":
                fail("the console channel is `clawbot chat`; `clawbot run` serves the platforms")
            problems = adapter_class(name).check_settings(settings)
            if problems:
                fail(f"{name} is not ready: {'; '.join(problems)}")
        return names
    names = [
        name
        for name in adapter_names()
        if name != "console" and adapter_class(name).is_configured(settings)
    ]
    if not names:
        fail(f"no channel is configured — {CHANNEL_SETTINGS_HINT}; `clawbot doctor` checks them")
    for name in names:
        problems = adapter_class(name).check_settings(settings)
        if problems:
            fail(f"{name} is not ready: {'; '.join(problems)}")
    return names


@app.command()
def run(
    channel: ChannelOption = None,
    model: ModelOption = None,
    home: HomeOption = None,
) -> None:
    """Serve the agent on Telegram, Discord and Slack until SIGINT/SIGTERM."""
    from clawbot.runtime.llm import check_credentials, preload_in_background, wait_for_preload

    preload_in_background()  # first: the adapters and the database start beside it
    settings = load(model, home)
    import asyncio

    from clawbot.errors import ClawbotError

    names = channels_to_run(settings, channel or [])
    try:
        check_credentials(settings.model)
    except ClawbotError as exc:
        fail(str(exc))
    try:
        with serving_lock(settings, "clawbot run"):
            try:
                asyncio.run(_run(settings, names))
            finally:
                wait_for_preload()
    except ClawbotError as exc:
        fail(str(exc), code=1)


async def _run(settings: Settings, names: list[str]) -> None:
    from clawbot.app import Clawbot
    from clawbot.cli.service import serve

    adapters = [adapter_class(name).from_settings(settings) for name in names]
    async with await Clawbot.open(settings) as bot:
        await serve(bot, adapters)


@app.command()
def doctor(model: ModelOption = None, home: HomeOption = None) -> None:
    """Check channel settings and token formats, the model key, home folder and database."""
    import asyncio

    from dotenv import load_dotenv

    from clawbot.cli.checks import all_ok, diagnose
    from clawbot.errors import ConfigError
    from clawbot.logs import redactor
    from clawbot.settings import load_settings

    load_dotenv(".env", override=False)
    redactor.add_from_environment()
    try:
        settings = load_settings(model=model, home=home)
    except ConfigError as exc:
        print(redactor.redact(f"{'problem':<8} settings: {exc}"))
        raise typer.Exit(1) from None
    redactor.add(*settings.secret_values())
    channels = {name: adapter_class(name) for name in adapter_names() if name != "console"}
    checks = asyncio.run(diagnose(settings, channels))
    for check in checks:
        print(redactor.redact(check.line))
    raise typer.Exit(0 if all_ok(checks) else 1)


pairing_app = typer.Typer(
    help="Approve or reject people who asked to DM the bot (DM policy 'pairing').",
    no_args_is_help=True,
)
app.add_typer(pairing_app, name="pairing")


@pairing_app.command("list")
def pairing_list(home: HomeOption = None) -> None:
    """Show the pairing codes waiting for approval."""
    import asyncio

    from clawbot.messages import utcnow
    from clawbot.routing.access import Pairing

    async def pending() -> list[str]:
        store = await _open_store(settings)
        try:
            now = utcnow()
            return [
                f"{r.channel:<9} {r.code}  {r.sender_name or '?'} ({r.sender_id}), "
                f"expires in {max(1, round((r.expires_at - now).total_seconds() / 60))} min"
                for r in await Pairing(store).pending()
            ]
        finally:
            await store.close()

    settings = load(home=home)
    lines = asyncio.run(pending())
    print("\n".join(lines) if lines else "No pairing codes are waiting.")


@pairing_app.command("approve")
def pairing_approve(
    channel: Annotated[str, typer.Argument(help="telegram, discord, slack ...")],
    code: Annotated[str, typer.Argument(help="the 8-character code the sender received")],
    home: HomeOption = None,
) -> None:
    """Let the sender of CODE talk to the agent; their next message reaches it."""
    request = _decide(channel, code, approve=True, home=home)
    print(
        f"Approved {request.sender_name or request.sender_id} ({request.sender_id}) on "
        f"{request.channel}. Their next message reaches the agent."
    )


@pairing_app.command("reject")
def pairing_reject(
    channel: Annotated[str, typer.Argument(help="telegram, discord, slack ...")],
    code: Annotated[str, typer.Argument(help="the 8-character code the sender received")],
    home: HomeOption = None,
) -> None:
    """Refuse the pairing request with CODE."""
    request = _decide(channel, code, approve=False, home=home)
    print(f"Rejected {request.sender_name or request.sender_id} on {request.channel}.")


def _decide(channel: str, code: str, *, approve: bool, home: Path | None) -> PairingRequest:
    import asyncio

    from clawbot.errors import ClawbotError
    from clawbot.routing.access import Pairing

    settings = load(home=home)

    async def decide() -> PairingRequest:
        store = await _open_store(settings)
        try:
            pairing = Pairing(store)
            if approve:
                return await pairing.approve(channel, code)
            return await pairing.reject(channel, code)
        finally:
            await store.close()

    try:
        return asyncio.run(decide())
    except ClawbotError as exc:
        fail(str(exc), code=1)


sessions_app = typer.Typer(help="Look at the stored sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")


@sessions_app.command("tree")
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
        store = await _open_store(settings)
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


@sessions_app.command("show")
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
    entries = _with_store(settings, read)
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


memory_app = typer.Typer(
    help="Search, export, import and forget the agents' memories (docs/memory.md).",
    no_args_is_help=True,
)
app.add_typer(memory_app, name="memory")


def _with_store(settings: Settings, work: Callable[[Store], Awaitable[T]]) -> T:
    """``work`` on the opened store, closed after; a store error is one clear line."""
    import asyncio

    from clawbot.errors import ClawbotError

    async def run() -> T:
        store = await _open_store(settings)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except ClawbotError as exc:
        fail(str(exc), code=1)


@memory_app.command("search")
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

    hits = _with_store(settings, search)
    for hit in hits:
        tags = f" [{', '.join(hit.memory.tags)}]" if hit.memory.tags else ""
        print(f"{hit.memory.ref}{tags}: {shorten(hit.memory.text, 200)}")
    if not hits:
        print(f"No memory matches {query!r}.", file=sys.stderr)


@memory_app.command("export")
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

    memories = _with_store(settings, every)
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


@memory_app.command("import")
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

    stored = _with_store(settings, restore)
    left = len(parsed.problems)
    print(
        f"Imported {stored} {'memory' if stored == 1 else 'memories'} from {file}; "
        f"{left} {'line' if left == 1 else 'lines'} left out."
    )
    if parsed.problems:
        raise typer.Exit(1)


@memory_app.command("forget")
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

    if not _with_store(settings, forget):
        fail(f"no memory {namespace}:{name} (`clawbot memory search` finds keys)", code=1)
    print(f"Forgot {namespace}:{name}.")


@memory_app.command("reindex")
def memory_reindex(home: HomeOption = None) -> None:
    """Embed every memory again for semantic recall (CLAWBOT_MEMORY_EMBEDDINGS), e.g. after
    changing the model; a bot does it for the memories without vectors at its first search."""
    settings = load(home=home, log_level="ERROR")

    async def reindex(store: Store) -> int | None:
        return await store.memories.reindex()

    embedded = _with_store(settings, reindex)
    if embedded is None:
        fail("semantic recall is off: set CLAWBOT_MEMORY_EMBEDDINGS (docs/memory.md)", code=1)
    print(f"Embedded {embedded} memories with {settings.memory_embeddings}.")


audit_app = typer.Typer(
    help="Read the audit records of tool calls (docs/access.md#audit).", no_args_is_help=True
)
app.add_typer(audit_app, name="audit")


@audit_app.command("tail")
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
        store = await _open_store(settings)
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


@audit_app.command("show")
def audit_show(
    trace: Annotated[str, typer.Option("--trace", help="a trace id (from `audit tail -n`)")],
    home: HomeOption = None,
) -> None:
    """Every tool call one message set off, across its subagents, as a tree."""
    import asyncio

    from clawbot.security.audit import render_trace
    from clawbot.subagents.tree import depth_below_root

    async def show() -> str:
        store = await _open_store(settings)
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


@audit_app.command("export")
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
        store = await _open_store(settings)
        try:
            for record in await store.audit.all():
                print(json.dumps(record.to_json(), ensure_ascii=False))
        finally:
            await store.close()

    settings = load(home=home)
    asyncio.run(export())


async def _open_store(settings: Settings) -> Store:
    from clawbot.errors import ClawbotError
    from clawbot.store import open_store

    try:
        return await open_store(settings)  # the embedding model loads at its first use
    except ClawbotError as exc:
        fail(str(exc), code=1)


def main() -> None:
    app()
