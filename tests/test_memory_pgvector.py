"""Semantic recall on PostgreSQL with pgvector (installed on the test server, as `.ci/run`
installs it): the nearest memories by meaning found by the database, the same ones the
exact in-process search finds, with no vectors held or loaded again in the process; a role
that may not create the extension, or a database without it, searches in the process as
on SQLite."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from clawbot.cli.main import app
from clawbot.memory.embeddings import LocalEmbedder
from clawbot.memory.records import MemoryQuery
from clawbot.store.memories import SqlMemories
from clawbot.store.postgres.search import tsvector_search
from clawbot.store.postgres.store import PostgresStore

from .postgres_server import PostgresServer
from .test_memory_semantic import DOG, EDITOR, PARAPHRASE, found, remember

NOTES = (
    DOG,
    EDITOR,
    "Her sister lives in Lisbon and visits every spring",
    "The quarterly report is due on the first Monday of April",
    "Allergic to peanuts; carries an epinephrine pen",
    "Prefers tea with oat milk in the morning",
    "The car needs new tyres before the winter trip",
    "Band practice moved to Thursday evenings in the garage",
    "Keeps the spare house key under the blue flower pot",
    "Wants reminders about the dentist two days ahead",
    "The cat hides under the bed during thunderstorms",
    "Learning Portuguese with a tutor on Saturdays",
)
QUERIES = (
    PARAPHRASE,
    "family abroad",
    "food allergy",
    "morning drink",
    "vehicle maintenance",
    "music rehearsal",
    "where is the key",
    "animal scared of storms",
    "language lessons",
    "deadline at work",
)


@pytest.fixture
async def pg(postgres_server: PostgresServer) -> AsyncIterator[PostgresStore]:
    """A store on a fresh PostgreSQL database (pgvector created by its migration), with
    the local embedding model."""
    store = await PostgresStore.open(postgres_server.new_database(migrated=True))
    assert store.vectors.version is not None, (
        f"pgvector is not usable on the test server ({store.vectors.reason}): install it"
        " with deploy/install-pgvector, as root"
    )
    store.memories.use_embeddings(LocalEmbedder())
    yield store
    await store.close()


def held(store: PostgresStore | SqlMemories) -> int:
    """How many vectors the process holds for a store's semantic recall."""
    memories = store.memories if isinstance(store, PostgresStore) else store
    assert isinstance(memories, SqlMemories)
    assert memories.semantic is not None
    return memories.semantic.lookup.rows_held()


async def test_pgvector_finds_by_meaning_what_the_exact_search_finds_holding_no_vectors(
    pg: PostgresStore,
) -> None:
    for n, text in enumerate(NOTES):
        await remember(pg, f"note-{n}", text, namespace=("main", "work")[n % 2])
    exact = SqlMemories(pg.database, tsvector_search)  # the in-process search, same rows
    exact.use_embeddings(LocalEmbedder())

    for text in QUERIES:
        for namespaces in (None, ("main",)):
            query = MemoryQuery(text=text, session_key="m:a", agent_id="main",
                                namespaces=namespaces, limit=4)  # fmt: skip
            by_pgvector = await pg.memories.search(query)
            by_matrix = await exact.search(query)
            assert [h.memory.ref for h in by_pgvector] == [h.memory.ref for h in by_matrix]
            for mine, theirs in zip(by_pgvector, by_matrix, strict=True):
                assert mine.score == pytest.approx(theirs.score, abs=1e-5)

    assert (await found(pg, PARAPHRASE))[0] == "main:note-0"
    assert pg.vectors.version is not None
    assert held(pg) == 0  # the database searched: nothing in this process
    assert held(exact) == len(NOTES)


async def test_a_memory_another_process_writes_is_found_by_meaning_with_nothing_to_load(
    pg: PostgresStore,
) -> None:
    await remember(pg, "note-b", EDITOR)
    assert await found(pg, PARAPHRASE) == ["main:note-b"]
    other = await PostgresStore.open(pg.database.url)
    try:
        other.memories.use_embeddings(LocalEmbedder())
        await remember(other, "note-a", DOG)
    finally:
        await other.close()

    assert (await found(pg, PARAPHRASE))[0] == "main:note-a"
    assert held(pg) == 0  # nothing was loaded to find it


async def test_memories_another_process_wrote_with_embeddings_off_are_found_after_a_start(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database(migrated=True)
    without = await PostgresStore.open(url)  # semantic recall off there
    await remember(without, "note-a", DOG)
    await remember(without, "note-b", EDITOR)
    await without.close()

    started = await PostgresStore.open(url)
    try:
        started.memories.use_embeddings(LocalEmbedder())

        assert (await found(started, PARAPHRASE))[0] == "main:note-a"
        assert held(started) == 0
    finally:
        await started.close()


async def test_a_role_that_may_not_create_pgvector_recalls_by_meaning_in_the_process(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = postgres_server.database_of("plain")

    with caplog.at_level(logging.WARNING, logger="clawbot.memory"):
        store = await PostgresStore.open(url)
    try:
        store.memories.use_embeddings(LocalEmbedder())
        await remember(store, "note-a", DOG)
        await remember(store, "note-b", EDITOR)

        assert (await found(store, PARAPHRASE))[0] == "main:note-a"
        assert store.vectors.version is None
        assert held(store) == 2  # the exact search, in this process
    finally:
        await store.close()
    said = [r.getMessage() for r in caplog.records if "pgvector" in r.getMessage()]
    assert len(said) == 1
    assert "may not create it" in said[0]
    assert "searches in each process instead" in said[0]


async def test_vectors_stored_before_pgvector_was_created_are_found_through_it(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.database_of("plain")
    store = await PostgresStore.open(url)  # pgvector refused: vectors in blobs only
    store.memories.use_embeddings(LocalEmbedder())
    await remember(store, "note-a", DOG)
    await remember(store, "note-b", EDITOR)
    await store.close()
    superuser = postgres_server.url(url.rsplit("/", 1)[1])
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")  # what the operator does, then a restart

    reopened = await PostgresStore.open(url)
    try:
        reopened.memories.use_embeddings(LocalEmbedder())

        assert (await found(reopened, PARAPHRASE))[0] == "main:note-a"
        assert reopened.vectors.version is not None
        assert held(reopened) == 0
    finally:
        await reopened.close()


def test_doctor_names_pgvector_as_the_semantic_search_on_postgresql(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.new_database(migrated=True)

    result = CliRunner().invoke(
        app,
        ["doctor", "--home", str(tmp_path)],
        env={"CLAWBOT_DATABASE_URL": url, "CLAWBOT_MEMORY_EMBEDDINGS": "local"},
    )

    line = next(line for line in result.stdout.splitlines() if " database " in f" {line}")
    assert re.search(r"; semantic search by pgvector \d+\.\d+\.\d+, in the database$", line)
