"""Semantic recall (CLAWBOT_MEMORY_EMBEDDINGS): memories found by meaning as well as by their
words, ranked by a blend of both; the vectors kept in step with every write; a model that
fails leaves full-text search working with one warning; off, nothing heavy is imported."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawbot.agents.profiles import ContextPolicy
from clawbot.app import Clawbot
from clawbot.cli.checks import semantic_check
from clawbot.cli.main import app
from clawbot.memory import embeddings
from clawbot.memory.chunks import chunks
from clawbot.memory.embeddings import LitellmEmbedder, LocalEmbedder
from clawbot.memory.recall import MEMORY_BLOCK
from clawbot.memory.records import Memory, MemoryQuery
from clawbot.settings import Settings
from clawbot.store import SqliteStore, Store
from clawbot.store.memories import SqlMemories
from clawbot.store.memory_vectors import WORN_ROWS
from clawbot.store.postgres.store import PostgresStore
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat
from .standins.openai_api import EMBEDDING_DIMS, OpenAIStandin

DOG = "The user's dog barks all evening and keeps the neighbours awake"
EDITOR = "Switched the code editor to night mode"
PARAPHRASE = "pet making noise at night"
"""Shares no word with DOG, and one ('night') with EDITOR."""


async def remember(
    store: Store,
    key: str,
    text: str,
    *,
    namespace: str = "main",
    session: str = "m:a",
) -> None:
    await store.memories.put(
        namespace=namespace, key=key, text=text, tags=(), session_key=session, agent_id=namespace
    )


async def found(
    store: Store,
    text: str,
    *,
    session: str = "m:a",
    agent: str = "main",
    namespaces: tuple[str, ...] | None = None,
) -> list[str]:
    query = MemoryQuery(text=text, session_key=session, agent_id=agent, namespaces=namespaces)
    return [hit.memory.ref for hit in await store.memories.search(query)]


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """The CLI sets up logging for the process (level, a handler on CliRunner's stderr):
    undone after each test, so later tests' caplog sees warnings."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)


@pytest.fixture
def semantic(each_store: Store) -> Store:
    """A store whose searches use the local embedding model, on each backend: SQLite and
    PostgreSQL (where pgvector, installed on the test server, searches the vectors;
    tests/test_memory_pgvector.py has PostgreSQL without it)."""
    each_store.memories.use_embeddings(LocalEmbedder())
    return each_store


async def another_process(store: Store, tmp_path: Path) -> Store:
    """A second store on the same database, as another process opens it."""
    if isinstance(store, PostgresStore):
        return await PostgresStore.open(store.database.url)
    return await SqliteStore.open(tmp_path / "clawbot.db")


@pytest.fixture
async def semantic_bot(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Clawbot]:
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        retry_backoff=0,
        memory_embeddings="local",
        _env_file=None,  # type: ignore[call-arg]
    )
    async with await Clawbot.open(settings) as opened:
        opened.connect(MemoryChannel())
        yield opened


def chat_with(bot: Clawbot) -> Chat:
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    return Chat(bot, channel)


# ranking -------------------------------------------------------------------------------


async def test_hybrid_ranking_puts_a_paraphrase_above_an_unrelated_keyword_match(
    store: SqliteStore, semantic_bot: Clawbot, scripted: ScriptedModel
) -> None:
    for memories in (store, semantic_bot.store):
        await remember(memories, "note-a", DOG)
        await remember(memories, "note-b", EDITOR)
    scripted.add(call("memory_search", query=PARAPHRASE), "ok")

    await chat_with(semantic_bot).say("what keeps the neighbours up?")

    assert await found(store, PARAPHRASE) == ["main:note-b"]  # words alone: the wrong one
    results = scripted.requests[1].tool_results[0].splitlines()
    assert results[0] == f"- main:note-a: {DOG}"


async def test_a_keyword_match_still_ranks_first_when_its_meaning_matches_too(
    semantic: Store,
) -> None:
    await remember(semantic, "note-a", DOG)
    await remember(semantic, "note-b", EDITOR)

    assert (await found(semantic, "code editor night mode"))[0] == "main:note-b"


async def test_among_equal_meanings_this_conversations_memory_ranks_first(
    semantic: Store,
) -> None:
    await remember(semantic, "dog-old", DOG, session="m:other")
    await remember(semantic, "dog-here", DOG, session="m:a")

    assert await found(semantic, PARAPHRASE, session="m:a") == ["main:dog-here", "main:dog-old"]


async def test_a_memory_outside_the_agents_namespaces_is_never_found_by_meaning(
    semantic: Store,
) -> None:
    await remember(semantic, "dog", DOG, namespace="scout")

    assert await found(semantic, PARAPHRASE, namespaces=("main",)) == []
    assert await found(semantic, PARAPHRASE, namespaces=("main", "scout")) == ["scout:dog"]


async def test_a_query_about_something_never_remembered_finds_nothing_by_meaning(
    semantic: Store,
) -> None:
    await remember(semantic, "note-a", DOG)

    assert await found(semantic, "quarterly budget spreadsheet") == []


# chunking ------------------------------------------------------------------------------


def test_a_long_text_is_cut_along_its_headings_then_its_paragraphs() -> None:
    text = (
        "# Home\n\nThe user lives in Lyon.\n\n"
        "## Pets\n\n" + "The dog is called Rex. " * 15 + "\n\n" + "The cat is Miso. " * 6 + "\n\n"
        "## Work\n\nThe user writes compilers."
    )

    pieces = chunks(text, max_chars=400)

    assert pieces[0] == "# Home\n\nThe user lives in Lyon."
    assert [p.splitlines()[0] for p in pieces[1:]] == ["## Pets", "## Pets", "## Work"]
    assert pieces[2] == "## Pets\n\n" + ("The cat is Miso. " * 6).strip()
    assert all(len(p) <= 400 + len("## Pets\n\n") for p in pieces)


def test_a_paragraph_over_the_cap_is_cut_at_word_boundaries() -> None:
    pieces = chunks("word " * 300, max_chars=200)

    assert len(pieces) == 8
    assert all(len(p) <= 200 and not p.startswith(" ") for p in pieces)
    assert " ".join(pieces).split() == ["word"] * 300


async def test_a_hit_on_one_section_of_a_long_memory_finds_that_memory(
    semantic: Store,
) -> None:
    sections = [
        f"## Trip {n}\n\n" + "Visited museums and bridges in the old town. " * 12 for n in range(5)
    ]
    sections.insert(3, f"## Home\n\n{DOG}")
    await remember(semantic, "diary", "\n\n".join(sections))
    await remember(semantic, "note-b", EDITOR)

    assert (await found(semantic, PARAPHRASE))[0] == "main:diary"


# keeping the vectors in step -----------------------------------------------------------


async def test_memories_written_while_embeddings_were_off_are_found_by_meaning_once_on(
    tmp_path: Path,
) -> None:
    opened = await SqliteStore.open(tmp_path / "later.db")
    try:
        await remember(opened, "note-a", DOG)
        await remember(opened, "note-b", EDITOR)
        opened.memories.use_embeddings(LocalEmbedder())

        assert (await found(opened, PARAPHRASE))[0] == "main:note-a"
    finally:
        await opened.close()


async def test_a_rewritten_memory_is_found_by_its_new_meaning_only(semantic: Store) -> None:
    await remember(semantic, "note-a", DOG)
    assert await found(semantic, PARAPHRASE) == ["main:note-a"]

    await remember(semantic, "note-a", "The user's favourite colour is teal")

    assert await found(semantic, PARAPHRASE) == []
    assert await found(semantic, "which shade does the user like best") == ["main:note-a"]


async def test_a_forgotten_memory_is_never_found_by_meaning(semantic: Store) -> None:
    await remember(semantic, "note-a", DOG)
    assert await found(semantic, PARAPHRASE) == ["main:note-a"]

    assert await semantic.memories.forget("main", "note-a")

    assert await found(semantic, PARAPHRASE) == []


async def test_imported_memories_are_found_by_meaning(semantic: Store) -> None:
    stamp = datetime(2026, 1, 2, tzinfo=UTC)
    memory = Memory("main", "note-a", DOG, (), "m:x", "main", stamp, stamp)
    await found(semantic, "anything")  # the vectors are loaded before the import

    await semantic.memories.restore([memory])

    assert await found(semantic, PARAPHRASE) == ["main:note-a"]


async def test_a_memory_another_process_writes_is_found_by_meaning(
    semantic: Store, tmp_path: Path
) -> None:
    await remember(semantic, "note-b", EDITOR)
    assert await found(semantic, PARAPHRASE) == ["main:note-b"]
    other = await another_process(semantic, tmp_path)
    try:
        other.memories.use_embeddings(LocalEmbedder())
        await remember(other, "note-a", DOG)
    finally:
        await other.close()

    assert (await found(semantic, PARAPHRASE))[0] == "main:note-a"


# where it is used ----------------------------------------------------------------------


async def test_the_recall_block_holds_a_paraphrase_when_embeddings_are_on(
    semantic_bot: Clawbot, scripted: ScriptedModel
) -> None:
    main = semantic_bot.agents.get("main")
    await semantic_bot.agents.update(
        main.model_copy(update={"context": ContextPolicy(memory_recall=True, recall_items=1)})
    )
    await remember(semantic_bot.store, "note-a", DOG)
    await remember(semantic_bot.store, "note-b", EDITOR)

    await chat_with(semantic_bot).say(PARAPHRASE)

    block = next(
        m["content"] for m in scripted.requests[0].messages if MEMORY_BLOCK in m["content"]
    )
    assert "main:note-a" in block and "main:note-b" not in block


async def test_the_memory_command_searches_by_meaning_when_embeddings_are_on(
    semantic_bot: Clawbot,
) -> None:
    await remember(semantic_bot.store, "note-a", DOG)
    await remember(semantic_bot.store, "note-b", EDITOR)
    chat = chat_with(semantic_bot)

    await chat.say(f"/memory {PARAPHRASE}")

    reply = chat.channel.texts[-1].splitlines()
    assert reply[1].startswith("• main:note-a:")


def test_clawbot_memory_search_and_reindex_use_the_embeddings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()

    async def seed() -> None:
        opened = await SqliteStore.open(home / "clawbot.db")
        await remember(opened, "note-a", DOG)
        await remember(opened, "note-b", EDITOR)
        await opened.close()

    asyncio.run(seed())
    monkeypatch.setenv("CLAWBOT_MEMORY_EMBEDDINGS", "local")
    runner = CliRunner()

    reindexed = runner.invoke(app, ["memory", "reindex", "--home", str(home)])
    searched = runner.invoke(app, ["memory", "search", PARAPHRASE, "--home", str(home)])

    assert reindexed.exit_code == 0, reindexed.output
    assert "Embedded 2 memories with local." in reindexed.output
    assert searched.stdout.splitlines()[0] == f"main:note-a: {DOG}"


def test_clawbot_memory_reindex_says_when_semantic_recall_is_off(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["memory", "reindex", "--home", str(tmp_path / "home")])

    assert result.exit_code == 1
    assert "semantic recall is off" in result.output


# a litellm embedding model -------------------------------------------------------------


async def test_a_litellm_embedding_model_finds_memories_by_its_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin = OpenAIStandin()
    same = [1.0] + [0.0] * (EMBEDDING_DIMS - 1)
    standin.vectors = {"xyzzy": same, "frobnicate": same}  # no word in common, one meaning
    with standin.running():
        monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        opened = await SqliteStore.open(tmp_path / "litellm.db")
        try:
            opened.memories.use_embeddings(LitellmEmbedder("openai/text-embedding-3-small"))
            await remember(opened, "note-a", "xyzzy plugh")
            await remember(opened, "note-b", "an unrelated note")

            assert await found(opened, "frobnicate") == ["main:note-a"]
        finally:
            await opened.close()
    assert "note a: xyzzy plugh" in standin.embedded and "frobnicate" in standin.embedded


# the local model -----------------------------------------------------------------------


async def test_the_local_model_loads_and_embeds_without_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("the local model reached for the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)

    vectors = await LocalEmbedder(dims=64).embed(["the dog barks", "a pet making noise"])

    assert vectors.shape == (2, 64)
    assert abs(float((vectors**2).sum(axis=1)[0]) - 1.0) < 1e-5


# failures ------------------------------------------------------------------------------


async def test_an_embedding_model_that_fails_leaves_full_text_search_and_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    standin = OpenAIStandin()
    standin.embedding_status = 400
    with standin.running(), caplog.at_level(logging.WARNING, logger="clawbot.memory"):
        monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        opened = await SqliteStore.open(tmp_path / "failing.db")
        try:
            opened.memories.use_embeddings(LitellmEmbedder("openai/text-embedding-3-small"))
            await remember(opened, "note-b", EDITOR)
            first = await found(opened, "editor night mode")
            second = await found(opened, "code editor")
        finally:
            await opened.close()

    assert first == second == ["main:note-b"]
    warnings = [r for r in caplog.records if "semantic recall is off" in r.getMessage()]
    assert len(warnings) == 1
    assert "text-embedding-3-small" in warnings[0].getMessage()
    assert "sk-test" not in caplog.text


async def test_a_model_that_worked_and_fails_for_a_while_is_used_again_once_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    standin = OpenAIStandin()
    same = [1.0] + [0.0] * (EMBEDDING_DIMS - 1)
    standin.vectors = {"xyzzy": same, "frobnicate": same}  # no word in common, one meaning
    with standin.running(), caplog.at_level(logging.WARNING, logger="clawbot.memory"):
        monkeypatch.setenv("OPENAI_API_BASE", standin.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        opened = await SqliteStore.open(tmp_path / "flaky.db")
        try:
            opened.memories.use_embeddings(LitellmEmbedder("openai/text-embedding-3-small"))
            await remember(opened, "note-a", "xyzzy plugh")
            standin.embedding_status = 503  # the provider has a bad minute
            during = [await found(opened, "frobnicate") for _ in range(3)]
            standin.embedding_status = None
            after = await found(opened, "frobnicate")
        finally:
            await opened.close()

    assert during == [[], [], []]  # full-text search alone meanwhile: no word in common
    assert after == ["main:note-a"]  # found by meaning again, without a restart
    warnings = [r for r in caplog.records if "embedding model failed" in r.getMessage()]
    assert len(warnings) == 1
    assert not any("semantic recall is off" in r.getMessage() for r in caplog.records)


async def test_a_memory_rewritten_many_times_keeps_the_index_compact(
    semantic: Store,
) -> None:
    for n in range(300):
        await remember(semantic, "todo", f"the dog barks, take {n}")
    await remember(semantic, "note-b", EDITOR)

    assert (await found(semantic, PARAPHRASE))[0] == "main:todo"  # its latest take
    assert isinstance(semantic.memories, SqlMemories)  # both backends' memories
    index = semantic.memories.semantic
    assert index is not None
    assert index.lookup.rows_held() <= 2 * WORN_ROWS  # the old takes' rows do not pile up


async def test_a_local_model_that_fails_to_load_costs_no_turn(
    tmp_path: Path,
    scripted: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(embeddings, "LOCAL_WEIGHTS", "weights/no-such-file.safetensors")
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        memory_embeddings="local",
        _env_file=None,  # type: ignore[call-arg]
    )
    scripted.add(
        call("memory_store", key="colour", text="Favourite colour: blue"),
        "Noted.",
        call("memory_search", query="favourite colour"),
        "Blue.",
    )
    with caplog.at_level(logging.WARNING, logger="clawbot.memory"):
        async with await Clawbot.open(settings) as bot:
            bot.connect(MemoryChannel())
            chat = chat_with(bot)
            await chat.say("remember that I like blue")
            await chat.say("which colour do I like?")

    assert chat.channel.texts == ["Noted.", "Blue."]
    assert scripted.requests[3].tool_results[-1] == "- main:colour: Favourite colour: blue"
    warnings = [r for r in caplog.records if "semantic recall is off" in r.getMessage()]
    assert len(warnings) == 1 and "did not load" in warnings[0].getMessage()


# off -----------------------------------------------------------------------------------

_TURN_WITH_RECALL = """
import asyncio, sys, tempfile
from pathlib import Path
from clawbot.agents.profiles import ContextPolicy
from clawbot.app import Clawbot
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel

async def main() -> None:
    model = ScriptedModel(name="imports")
    with model.installed():
        settings = Settings(
            home=Path(tempfile.mkdtemp()), model=model.model_string,
            memory_embeddings=sys.argv[1], _env_file=None,
        )
        async with await Clawbot.open(settings) as bot:
            channel = MemoryChannel()
            bot.connect(channel)
            main = bot.agents.get("main")
            policy = ContextPolicy(memory_recall=True)
            await bot.agents.update(main.model_copy(update={"context": policy}))
            await bot.store.memories.put(
                namespace="main", key="dog", text="the dog barks", tags=(),
                session_key="x", agent_id="main",
            )
            await bot.router.handle(channel.message("does the dog bark?"))
            assert "[Context: memory]" in str(model.requests[0].messages)
    print(",".join(m for m in ("numpy", "wordllama", "safetensors") if m in sys.modules))

asyncio.run(main())
"""


@pytest.mark.parametrize(("setting", "imported"), [("off", ""), ("local", "numpy,safetensors")])
def test_a_turn_with_recall_imports_numpy_only_when_embeddings_are_on(
    setting: str, imported: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _TURN_WITH_RECALL, setting],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.rstrip("\n").split("\n")[-1] == imported


# clawbot doctor ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "broken", "line"),
    [
        ("off", False, "off      semantic recall: full-text search alone"),
        ("local", False, "ok       semantic recall: local/wordllama-l2_supercat-128 loads"),
        ("local", True, "problem  semantic recall: the local embedding model did not load"),
        ("openai/text-embedding-3-small", False, "ok       semantic recall: openai/"),
    ],
)
async def test_doctor_says_whether_the_embedding_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, broken: bool, line: str
) -> None:
    if broken:
        monkeypatch.setattr(embeddings, "LOCAL_WEIGHTS", "weights/no-such-file.safetensors")
    settings = Settings(home=tmp_path, memory_embeddings=setting, _env_file=None)  # type: ignore[call-arg]

    check = await semantic_check(settings)

    assert check.line.startswith(line)
