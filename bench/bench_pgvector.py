"""Semantic recall on PostgreSQL: pgvector in the database against the exact search in each
process (the matrix), on the same database, at 10,000 and 100,000 memories.

    python bench/bench_pgvector.py                      # 10,000 and 100,000
    python bench/bench_pgvector.py --memories 10000     # one size
    python bench/bench_pgvector.py --hnsw               # and an HNSW index, for comparison

A PostgreSQL server is started in a temporary folder (tests/postgres_server.py, pgvector
installed: deploy/install-pgvector). Memories are written in batches through
``store.memories.restore`` with the local embedding model (128 dimensions), by 20 agents,
texts as in bench_memories.py (meaningless to the model: this measures cost, not quality).
Printed for each lookup: the nearest-vector search alone (what pgvector replaces), a whole
hybrid search (three namespaces of twenty, five results), the first search of a process
(the matrix loads every vector, pgvector only checks), the search after another process
wrote (the matrix loads again), and the memory the process holds for the vectors. With
``--hnsw``, an HNSW index (pgvector's approximate one, default ``ef_search`` 40) is built and
its nearest pieces (every namespace) compared with the exact search's: time and recall@10.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memories import AGENTS, Words, percentile

from clawbot.memory.embeddings import LocalEmbedder
from clawbot.memory.records import Memory, MemoryQuery
from clawbot.store.memories import SqlMemories
from clawbot.store.memory_vectors import Near, SemanticIndex
from clawbot.store.postgres.search import tsvector_search
from clawbot.store.postgres.store import PostgresStore
from clawbot.store.postgres.vectors import PgVectors, literal
from clawbot.store.sql import Connection
from tests.postgres_server import PostgresServer

if TYPE_CHECKING:
    from clawbot.store.protocols.memories import Vectors

BATCH = 1000
QUERIES = 200


def rss_mb() -> float:
    """This process's resident memory now (Linux: /proc/self/statm), in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 1024 / 1024


async def fill(store: PostgresStore, words: Words, count: int) -> float:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    started = time.perf_counter()
    for start in range(0, count, BATCH):
        batch = [
            Memory(
                namespace=(agent := words.rng.choice(AGENTS)),
                key=f"note-{n}",
                text=words.text(8, 40, 0.3),
                tags=(),
                session_key=f"telegram:{words.rng.randrange(2000)}",
                agent_id=agent,
                created_at=stamp,
                updated_at=stamp,
            )
            for n in range(start, min(count, start + BATCH))
        ]
        await store.memories.restore(batch)
    return time.perf_counter() - started


def queries(words: Words) -> list[MemoryQuery]:
    rng = words.rng
    found = []
    for _ in range(QUERIES):
        agent = rng.choice(AGENTS)
        found.append(
            MemoryQuery(
                text=words.text(6, 14, 0.4),
                session_key=f"telegram:{rng.randrange(2000)}",
                agent_id=agent,
                namespaces=(agent, *rng.sample(AGENTS, 2)),
                limit=5,
            )
        )
    return found


def index_of(memories: SqlMemories) -> SemanticIndex:
    assert memories.semantic is not None
    return memories.semantic


async def measure(
    name: str,
    store: PostgresStore,
    memories: SqlMemories,
    embedder: LocalEmbedder,
    asked: list[MemoryQuery],
) -> None:
    before = rss_mb()
    started = time.perf_counter()
    await memories.search(asked[0])  # the first search: the matrix loads everything
    first = time.perf_counter() - started
    held = rss_mb() - before
    index = index_of(memories)
    vectors = await index.embed([q.text for q in asked])
    assert vectors is not None
    nearest = []
    for query, vector in zip(asked, vectors, strict=True):

        def near(
            db: Connection, query: MemoryQuery = query, vector: Vectors = vector
        ) -> list[Near]:
            return index.lookup.nearest(db, vector, query.namespaces, 10)

        started = time.perf_counter()
        await store.database.read(near)
        nearest.append((time.perf_counter() - started) * 1000)
    hybrid = []
    for query in asked:
        started = time.perf_counter()
        await memories.search(query)
        hybrid.append((time.perf_counter() - started) * 1000)
    other = await PostgresStore.open(store.database.url)  # another process writes one memory
    other.memories.use_embeddings(embedder)
    await other.memories.put(
        namespace="agent0", key="from-elsewhere", text="a note from another process",
        tags=(), session_key="x", agent_id="agent0",
    )  # fmt: skip
    await other.close()
    started = time.perf_counter()
    await memories.search(asked[0])
    after_write = (time.perf_counter() - started) * 1000
    rows = index.lookup.rows_held()
    print(
        f"  {name:<8} nearest p50 {statistics.median(nearest):6.2f} ms, p99"
        f" {percentile(nearest, 0.99):6.2f} ms | hybrid search p50"
        f" {statistics.median(hybrid):6.2f} ms, p99 {percentile(hybrid, 0.99):6.2f} ms |"
        f" first search {first:5.2f} s | after another process's write {after_write:7.1f} ms |"
        f" held: {rows:,} vectors, {rows * 128 * 4 / 1024 / 1024:.1f} MB of matrix"
        f" (RSS +{held:.1f} MB)"
    )


async def hnsw(store: PostgresStore, embedder: LocalEmbedder, asked: list[MemoryQuery]) -> None:
    """Build an HNSW index on the model's vectors and compare its nearest ten with the
    exact search's (what clawbot does not do: see docs/postgres.md)."""
    dims = embedder.dims
    started = time.perf_counter()
    await store.database.write(
        f"CREATE INDEX bench_hnsw ON memory_embeddings USING hnsw"
        f" ((embedding::vector({dims})) vector_ip_ops) WHERE model = '{embedder.name}'",
        (),
    )
    built = time.perf_counter() - started
    vectors = await embedder.embed([q.text for q in asked])
    exact_sql = (
        f"SELECT memory_id FROM memory_embeddings WHERE model = '{embedder.name}'"
        " ORDER BY embedding <#> ?::vector LIMIT 10"
    )
    index_sql = (
        f"SELECT memory_id FROM memory_embeddings WHERE model = '{embedder.name}'"
        f" ORDER BY embedding::vector({dims}) <#> ?::vector({dims}) LIMIT 10"
    )
    times, found = [], []
    for vector in vectors:
        text = literal(vector)
        exact = {row[0] for row in await store.database.fetchall(exact_sql, (text,))}
        started = time.perf_counter()
        near = await store.database.fetchall(index_sql, (text,))
        times.append((time.perf_counter() - started) * 1000)
        found.append(len(exact & {row[0] for row in near}) / 10)
    print(
        f"  hnsw     built in {built:.1f} s; nearest ten p50 {statistics.median(times):.2f} ms,"
        f" recall@10 {statistics.mean(found):.2f} (exact: 1.00)"
    )


async def run(server: PostgresServer, count: int, with_hnsw: bool) -> None:
    words = Words(random.Random(19))
    store = await PostgresStore.open(server.new_database(migrated=True))
    try:
        assert store.vectors.version is not None, "pgvector is not installed on this server"
        embedder = LocalEmbedder()  # one model for every store: RSS grows by the vectors only
        store.memories.use_embeddings(embedder)
        took = await fill(store, words, count)
        (rows,) = await store.database.fetchone("SELECT count(*) FROM memory_vectors")
        print(f"{count:,} memories ({rows:,} vectors of 128 dimensions) written in {took:.1f} s")
        asked = queries(words)
        pgvector = SqlMemories(store.database, tsvector_search, PgVectors)  # as a new process
        pgvector.use_embeddings(embedder)
        await measure("pgvector", store, pgvector, embedder, asked)
        matrix = SqlMemories(store.database, tsvector_search)  # the exact search in-process
        matrix.use_embeddings(embedder)
        await measure("matrix", store, matrix, embedder, asked)
        if with_hnsw:
            await hnsw(store, embedder, asked)
    finally:
        await store.close()


async def main(sizes: list[int], with_hnsw: bool) -> None:
    server = PostgresServer()
    server.start()
    try:
        for count in sizes:
            await run(server, count, with_hnsw)
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, action="append")
    parser.add_argument("--hnsw", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(args.memories or [10_000, 100_000], args.hnsw))
