"""Semantic recall on PostgreSQL with pgvector: the nearest vectors are found by the database,
so no process holds them in memory or loads them again when another process writes.

The extension is used when the server has it: migrating a database creates it there
(``CREATE EXTENSION vector``, which needs a superuser: pgvector is not a trusted extension)
and the table ``memory_embeddings``: each piece's vector as a pgvector ``vector``, with its
memory's namespace (a search reads only the namespaces it asks for), written alongside the
float32 blob of ``memory_vectors`` that every backend keeps (what a copy and the in-process
search read) and deleted with it. A role that may not create the extension, or a server
without it, leaves the database as it was: semantic recall then searches in each process,
exactly, as on SQLite (``clawbot.store.memory_vectors``).

The search is exact: every vector of the model in the namespaces asked is compared with the
query by inner product (``<#>``; the vectors have unit length, so it is the cosine similarity
the matrix computes), with no approximate index, so it finds the memories the in-process
search finds (docs/postgres.md has the figures, and why no HNSW index)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from clawbot.store.memory_vectors import Near, State, read_state, store_blobs
from clawbot.store.sql import Connection, SqlDatabase

if TYPE_CHECKING:
    from clawbot.store.protocols.memories import Vectors

log = logging.getLogger("clawbot.memory")

EXTENSION = "vector"
FILL_BATCH = 1000
"""Stored pieces given their ``memory_embeddings`` row per transaction when it is missing."""
_TABLE = """
CREATE TABLE memory_embeddings (
    memory_id BIGINT NOT NULL,
    chunk     INTEGER NOT NULL,
    model     TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (memory_id, chunk),
    FOREIGN KEY (memory_id, chunk) REFERENCES memory_vectors (memory_id, chunk)
        ON DELETE CASCADE
);
CREATE INDEX memory_embeddings_near ON memory_embeddings (model, namespace);
"""
_INSERT = (
    "INSERT INTO memory_embeddings (memory_id, chunk, model, namespace, embedding)"
    " SELECT ?, ?, ?, m.namespace, ?::vector FROM memories m WHERE m.id = ?"
)
_MISSING = (
    "SELECT v.id, v.memory_id, v.chunk, v.model, m.namespace, v.vector FROM memory_vectors v"
    " JOIN memories m ON m.id = v.memory_id WHERE v.id > ? AND NOT EXISTS (SELECT 1 FROM"
    " memory_embeddings e WHERE e.memory_id = v.memory_id AND e.chunk = v.chunk)"
    " ORDER BY v.id LIMIT ?"
)
_DISTANCE = "CASE WHEN vector_dims(e.embedding) = ? THEN e.embedding <#> ?::vector END"
"""Minus the similarity of a stored piece to the query (NULL for a piece of another size, a
damaged row, rather than pgvector's error; a condition in WHERE would mislead the planner)."""
_SUPPORT = (
    "SELECT e.extversion, to_regclass('memory_embeddings') IS NOT NULL"
    " FROM pg_available_extensions a LEFT JOIN pg_extension e ON e.extname = a.name"
    " WHERE a.name = %s"
)


@dataclass(frozen=True)
class VectorSupport:
    """Whether this database searches vectors with pgvector (its version), and if not why."""

    version: str | None
    reason: str = ""

    @property
    def line(self) -> str:
        """One line for ``clawbot doctor``."""
        if self.version is not None:
            return f"by pgvector {self.version}, in the database"
        return f"exact, in each process ({self.reason})"


def support(conn: psycopg.Connection[Any]) -> VectorSupport:
    """What this database offers semantic recall."""
    row = conn.execute(_SUPPORT, (EXTENSION,)).fetchone()
    if row is None:
        return VectorSupport(None, "pgvector is not installed on the server")
    created, table = row
    if created is None:
        return VectorSupport(
            None, "pgvector is on the server but not created in this database: a superuser"
            " can run CREATE EXTENSION vector there, then restart clawbot",
        )  # fmt: skip
    if not table:
        return VectorSupport(None, "pgvector is created but the database is not migrated yet")
    return VectorSupport(str(created))


def enable(conn: psycopg.Connection[Any], where: str) -> None:
    """Create pgvector in the database when the server has it and this role may, and the
    table ``memory_embeddings``; a refusal is one log line, never an error.
    Run at every migration (an extension installed later is taken up at the next start),
    in a transaction holding the migrations' advisory lock."""
    row = conn.execute(_SUPPORT, (EXTENSION,)).fetchone()
    if row is None:
        return  # not on the server: the exact search, in each process
    created, table = row
    if created is None:
        try:
            with conn.transaction():  # a savepoint: a refusal leaves the rest as it was
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            log.warning(
                "pgvector is on the server but this role may not create it in %s (CREATE"
                " EXTENSION vector needs a superuser): semantic recall searches in each"
                " process instead",
                where,
            )
            return
    if not table:
        conn.execute(_TABLE)


def literal(row: Vectors) -> str:
    """A float32 row as pgvector's text form; each float's shortest decimal reads back as
    the same float32, so the database compares the very vectors the matrix would."""
    return "[" + ",".join(map(repr, row.tolist())) + "]"


class PgVectors:
    """The :class:`~clawbot.store.memory_vectors.VectorLookup` of a database with pgvector:
    every search reads the stored vectors, so nothing is held here and another process's
    write needs no reload (``reloads`` False: ``state`` only says it was loaded once)."""

    reloads = False

    def __init__(self) -> None:
        self.state: State | None = None
        self._model = ""

    async def load(self, database: SqlDatabase, model: str) -> None:
        """Give the stored pieces without a ``memory_embeddings`` row (stored before pgvector
        was created, copied from SQLite, written by an older clawbot) theirs; nothing is read
        into this process."""
        self._model = model
        after = 0
        while after >= 0:
            after = await database.transaction(functools.partial(_fill, after=after))
        self.state = await database.read(read_state, flush=False)

    def store(self, db: Connection, memory_id: int, model: str, vectors: Vectors) -> None:
        store_blobs(db, memory_id, model, vectors)  # deletes the old ones too
        db.executemany(
            _INSERT,
            [
                (memory_id, chunk, model, literal(row), memory_id)
                for chunk, row in enumerate(vectors)
            ],
        )

    def write(
        self, before: State, after: State, memory_id: int, namespace: str, vectors: Vectors
    ) -> None:
        """Nothing to follow: the database has it."""

    def drop(self, before: State, after: State, memory_ids: Sequence[int]) -> None:
        """Nothing to follow: the database has it."""

    def invalidate(self) -> None:
        """Nothing to load again."""

    def rows_held(self) -> int:
        return 0

    def nearest(
        self, db: Connection, query: Vectors, namespaces: Sequence[str] | None, count: int
    ) -> list[Near]:
        """The ``count`` nearest memories: their ``count * 4`` nearest pieces (a memory may
        have several), as the matrix takes them, then each memory's best."""
        if namespaces is not None and not namespaces:
            return []
        where = ""
        if namespaces is not None:
            where = f" AND e.namespace IN ({', '.join('?' * len(namespaces))})"
        rows = db.execute(
            f"SELECT memory_id, min(distance) FROM (SELECT e.memory_id, {_DISTANCE} AS distance"
            f" FROM memory_embeddings e WHERE e.model = ?{where}"
            " ORDER BY distance LIMIT ?) best WHERE distance IS NOT NULL"
            " GROUP BY memory_id ORDER BY min(distance), memory_id LIMIT ?",
            (len(query), literal(query), self._model, *(namespaces or ()), count * 4, count),
        ).fetchall()
        return [Near(int(memory_id), -float(distance)) for memory_id, distance in rows]

    def similarity(
        self, db: Connection, query: Vectors, memory_ids: Sequence[int]
    ) -> dict[int, float]:
        if not memory_ids:
            return {}
        rows = db.execute(
            f"SELECT e.memory_id, min({_DISTANCE}) FROM memory_embeddings e WHERE e.model = ?"
            f" AND e.memory_id IN ({', '.join('?' * len(memory_ids))}) GROUP BY e.memory_id",
            (len(query), literal(query), self._model, *memory_ids),
        ).fetchall()
        return {int(m): -float(d) for m, d in rows if d is not None}


def _fill(db: Connection, after: int) -> int:
    """Give a batch of stored pieces past ``memory_vectors.id`` ``after`` their missing
    ``memory_embeddings`` row; the last id, or -1 when none was left (a damaged blob, not
    whole float32s, gets none and is never matched)."""
    import numpy as np

    rows = db.execute(_MISSING, (after, FILL_BATCH)).fetchall()
    if not rows:
        return -1
    filled = [
        (memory_id, chunk, model, namespace, literal(np.frombuffer(bytes(blob), dtype="<f4")))
        for _, memory_id, chunk, model, namespace, blob in rows
        if blob and len(blob) % 4 == 0
    ]
    if filled:
        db.executemany(
            "INSERT INTO memory_embeddings (memory_id, chunk, model, namespace, embedding)"
            " VALUES (?, ?, ?, ?, ?::vector) ON CONFLICT DO NOTHING",
            filled,
        )
    return int(rows[-1][0])
