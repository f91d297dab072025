"""Semantic recall on PostgreSQL with pgvector: the nearest vectors are found by the database,
so no process holds them in memory or loads them again when another process writes.

The extension is used when the server has it: migrating a database creates it there
(``CREATE EXTENSION vector``, which needs a superuser: pgvector is not a trusted extension)
and adds ``memory_vectors.embedding``, a ``vector`` filled alongside the float32 ``vector``
blob every backend keeps (the blob stays what a copy or the exact search reads). A role that
may not create it, or a server without it, leaves the database as it was: semantic recall
then searches in each process, exactly, as on SQLite (``clawbot.store.memory_vectors``).

The search is exact: every vector of the model (in the namespaces asked) is compared with
the query by inner product (``<#>``; the vectors have unit length, so it is the cosine
similarity the matrix computes), with no approximate index, so it finds the memories the
in-process search finds (docs/memory.md has the figures and why no HNSW index)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from clawbot.store.memories import within
from clawbot.store.memory_vectors import Near, State, read_state
from clawbot.store.sql import Connection, SqlDatabase

if TYPE_CHECKING:
    from clawbot.store.protocols.memories import Vectors

log = logging.getLogger("clawbot.memory")

EXTENSION = "vector"
FILL_BATCH = 1000
"""Stored vectors given their ``embedding`` per transaction when it is missing."""
_INSERT = (
    "INSERT INTO memory_vectors (memory_id, chunk, model, vector, embedding)"
    " VALUES (?, ?, ?, ?, ?::vector)"
)
_DISTANCE = "CASE WHEN vector_dims(v.embedding) = ? THEN v.embedding <#> ?::vector END"
"""Minus the similarity of a stored piece to the query (NULL for a piece of another size, a
damaged row, rather than pgvector's error; a condition in WHERE would mislead the planner)."""
_SUPPORT = (
    "SELECT a.default_version, e.extversion, EXISTS (SELECT 1 FROM pg_attribute c"
    " WHERE c.attrelid = to_regclass('memory_vectors') AND c.attname = 'embedding'"
    " AND NOT c.attisdropped AND c.atttypid = to_regtype('vector'))"
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
    _available, created, column = row
    if created is None:
        return VectorSupport(
            None, "pgvector is on the server but not created in this database: a superuser"
            " can run CREATE EXTENSION vector there, then restart clawbot",
        )  # fmt: skip
    if not column:
        return VectorSupport(None, "pgvector is created but the database is not migrated yet")
    return VectorSupport(str(created))


def enable(conn: psycopg.Connection[Any], where: str) -> None:
    """Create pgvector in the database when the server has it and this role may, and give
    ``memory_vectors`` its ``embedding`` column; a refusal is one log line, never an error.
    Run at every migration (an extension installed later is taken up at the next start),
    in a transaction holding the migrations' advisory lock."""
    row = conn.execute(_SUPPORT, (EXTENSION,)).fetchone()
    if row is None:
        return  # not on the server: the exact search, in each process
    _available, created, column = row
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
    if not column:
        conn.execute("ALTER TABLE memory_vectors ADD COLUMN embedding vector")
        conn.execute(
            "CREATE INDEX memory_vectors_unembedded ON memory_vectors (id) WHERE embedding IS NULL"
        )


def literal(row: Vectors) -> str:
    """A float32 row as pgvector's text form; each float's shortest decimal reads back as
    the same float32, so the database compares the very vectors the matrix would."""
    return "[" + ",".join(map(repr, row.tolist())) + "]"


class PgVectors:
    """The :class:`~clawbot.store.memory_vectors.VectorLookup` of a database with pgvector:
    searches run in SQL; ``state`` only tells when another process wrote, so memories it
    stored without vectors (semantic recall off there) are embedded here, as on SQLite."""

    def __init__(self) -> None:
        self.state: State | None = None
        self._model = ""

    async def load(self, database: SqlDatabase, model: str) -> None:
        """Give the stored vectors without an ``embedding`` (written before pgvector, by a
        copy, by an older clawbot) theirs; nothing is read into this process."""
        self._model = model
        after = 0
        while after >= 0:
            after = await database.transaction(functools.partial(_fill, after=after))
        self.state = await database.read(read_state, flush=False)

    def store(self, db: Connection, memory_id: int, model: str, vectors: Vectors) -> None:
        db.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
        db.executemany(
            _INSERT,
            [
                (memory_id, chunk, model, row.astype("<f4").tobytes(), literal(row))
                for chunk, row in enumerate(vectors)
            ],
        )

    def write(
        self, before: State, after: State, memory_id: int, namespace: str, vectors: Vectors
    ) -> None:
        self.state = after if self.state == before else None

    def drop(self, before: State, after: State, memory_ids: Sequence[int]) -> None:
        self.state = after if self.state == before else None

    def invalidate(self) -> None:
        self.state = None

    def rows_held(self) -> int:
        return 0

    def nearest(
        self, db: Connection, query: Vectors, namespaces: Sequence[str] | None, count: int
    ) -> list[Near]:
        """The ``count`` nearest memories: their ``count * 4`` nearest pieces (a memory may
        have several), as the matrix takes them, then each memory's best."""
        where, params = within(namespaces, ())
        join = " JOIN memories m ON m.id = v.memory_id" if where else ""
        rows = db.execute(
            f"SELECT memory_id, min(distance) FROM (SELECT v.memory_id, {_DISTANCE} AS distance"
            f" FROM memory_vectors v{join} WHERE v.model = ?{where}"
            " ORDER BY distance LIMIT ?) best WHERE distance IS NOT NULL"
            " GROUP BY memory_id ORDER BY min(distance), memory_id LIMIT ?",
            (len(query), literal(query), self._model, *params, count * 4, count),
        ).fetchall()
        return [Near(int(memory_id), -float(distance)) for memory_id, distance in rows]

    def similarity(
        self, db: Connection, query: Vectors, memory_ids: Sequence[int]
    ) -> dict[int, float]:
        if not memory_ids:
            return {}
        rows = db.execute(
            f"SELECT v.memory_id, min({_DISTANCE}) FROM memory_vectors v WHERE v.model = ?"
            f" AND v.memory_id IN ({', '.join('?' * len(memory_ids))}) GROUP BY v.memory_id",
            (len(query), literal(query), self._model, *memory_ids),
        ).fetchall()
        return {int(m): -float(d) for m, d in rows if d is not None}


def _fill(db: Connection, after: int) -> int:
    """Fill a batch of missing embeddings past id ``after``; the last id, or -1 when none
    was left (a damaged blob, not whole float32s, stays without one and is never matched)."""
    import numpy as np

    rows = db.execute(
        "SELECT id, vector FROM memory_vectors WHERE embedding IS NULL AND id > ?"
        " ORDER BY id LIMIT ?",
        (after, FILL_BATCH),
    ).fetchall()
    if not rows:
        return -1
    filled = [
        (literal(np.frombuffer(bytes(blob), dtype="<f4")), int(row_id))
        for row_id, blob in rows
        if blob and len(blob) % 4 == 0
    ]
    if filled:
        db.executemany("UPDATE memory_vectors SET embedding = ?::vector WHERE id = ?", filled)
    return int(rows[-1][0])
