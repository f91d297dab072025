"""Shared fixtures: a real SQLite file in a temp dir, a scripted model behind the real litellm
call, and an in-memory channel to read what the outbox delivered."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from clawbot.agents.profiles import AgentSpec
from clawbot.app import Clawbot
from clawbot.messages import InboundMessage
from clawbot.routing.router import Handled
from clawbot.routing.sessions import Session
from clawbot.settings import Settings
from clawbot.store import SqliteStore, Store
from clawbot.store.postgres.store import PostgresStore
from clawbot.testing import MemoryChannel, ScriptedModel

from .postgres_server import PostgresServer
from .spawned import kill_leftovers
from .standins.openai_api import OpenAIStandin

STORE_SESSION = Session(key="m:a", channel="m", chat_id="a", agent_id="main")


def sqlite_store(bot: Clawbot) -> SqliteStore:
    """The bot's store as the SQLite one, for a test that reaches below the Store protocol."""
    assert isinstance(bot.store, SqliteStore)
    return bot.store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """A store on a fresh database file, holding the session ``STORE_SESSION``."""
    opened = await SqliteStore.open(tmp_path / "clawbot.db")
    await opened.sessions.create(STORE_SESSION)
    yield opened
    await opened.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server in a temporary folder, for the whole test run."""
    server = PostgresServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
async def each_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store on each backend in turn (a fresh SQLite file, then a fresh PostgreSQL
    database), holding the session ``STORE_SESSION``: the store's behaviour tests take it,
    so each runs on both."""
    opened: Store
    if request.param == "sqlite":
        opened = await SqliteStore.open(tmp_path / "clawbot.db")
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        opened = await PostgresStore.open(server.new_database(migrated=True))
    await opened.sessions.create(STORE_SESSION)
    yield opened
    await opened.close()


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's CLAWBOT_* settings, .env or clawbot.toml. Tests of
    everything but approvals run with full autonomy (guarded tools run without asking, as
    for an operator who trusts their agents); tests/test_approvals.py and the tests of the
    approval buttons set ``autonomy="supervised"``, the shipped default, themselves."""
    for name in list(os.environ):
        if name.startswith("CLAWBOT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CLAWBOT_AUTONOMY", "full")
    monkeypatch.chdir(tmp_path)
    # The default home (~/.clawbot) and its clawbot.toml are the test's own, not the user's.
    monkeypatch.setenv("HOME", str(tmp_path / "user"))


@pytest.fixture
async def spawned_processes() -> AsyncIterator[None]:
    """Kills and reaps every process the test started through ``tests.spawned.spawn`` and
    left running (it failed before stopping its bot), so none outlives its test."""
    yield
    await kill_leftovers()


@pytest.fixture
def standin() -> Iterator[OpenAIStandin]:
    """An OpenAI-compatible server on 127.0.0.1, for the CLI run as a subprocess."""
    server = OpenAIStandin()
    with server.running():
        yield server


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    model = ScriptedModel(name="test")
    with model.installed():
        yield model


@pytest.fixture
def settings(tmp_path: Path, scripted: ScriptedModel) -> Settings:
    return Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        retry_backoff=0,
        shell_unsandboxed="allow-host-access",  # where bwrap cannot run: the shell on the host
        _env_file=None,  # type: ignore[call-arg]
    )


@pytest.fixture
async def bot(settings: Settings) -> AsyncIterator[Clawbot]:
    async with await Clawbot.open(settings) as opened:
        opened.connect(MemoryChannel())
        yield opened


@pytest.fixture
def channel(bot: Clawbot) -> MemoryChannel:
    adapter = bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter


class Chat:
    """Say things to the bot as one user in one chat."""

    def __init__(self, bot: Clawbot, channel: MemoryChannel, chat_id: str = "chat1") -> None:
        self.bot = bot
        self.channel = channel
        self.chat_id = chat_id

    async def say(self, text: str, **fields: object) -> Handled:
        message: InboundMessage = self.channel.message(text, chat_id=self.chat_id, **fields)  # type: ignore[arg-type]
        return await self.bot.router.handle(message)


@pytest.fixture
def chat(bot: Clawbot, channel: MemoryChannel) -> Chat:
    return Chat(bot, channel)


@pytest.fixture
def worker() -> Iterator[ScriptedModel]:
    """The model of the ``worker`` agent: children's turns have a script of their own."""
    model = ScriptedModel(name="worker")
    with model.installed():
        yield model


async def add_agent(bot: Clawbot, agent_id: str, **fields: object) -> AgentSpec:
    spec = AgentSpec(agent_id=agent_id, name=agent_id, **fields)  # type: ignore[arg-type]
    return await bot.agents.create(spec)


@pytest.fixture
async def workers(bot: Clawbot, worker: ScriptedModel) -> AsyncIterator[Clawbot]:
    """The bot with a ``worker`` agent that runs on the ``worker`` model."""
    await add_agent(bot, "worker", model=worker.model_string)
    yield bot


async def until_idle(bot: Clawbot, session_key: str) -> None:
    """Return once ``session_key`` runs no turn. A child's scripted model awaits this
    before it answers when a test needs the child's report to start a turn of the parent's
    own, rather than wait in the busy parent's backlog (which is merged into a
    ``[Backlog]`` turn). Yields to the event loop only, never a timer."""
    for _ in range(100_000):
        if bot.scheduler.queue_state(session_key).active is None:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"session {session_key} stayed busy")


def parent_key(channel: MemoryChannel) -> str:
    """The session key of the test chat, the parent of the subagents it spawns."""
    return f"{channel.name}:chat1"
