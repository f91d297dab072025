"""The vectors of semantic recall: stored in ``memory_vectors`` (migration 0015), searched in
memory. SQLite here cannot load sqlite-vec, and an exact search needs none: each process
keeps every vector in one float32 matrix, and a query is one matrix-vector product (at
100,000 memories and 128 dimensions, about 2 ms; docs/memory.md has the figures). On
PostgreSQL with pgvector the search runs in the database instead
(``clawbot.store.postgres.vectors``): both are a :class:`VectorLookup`.

The matrix is loaded at the first search or write, after the memories without vectors of
the current model are embedded (a backfill: memories written while semantic recall was off,
or with another model). This process's writes update it in the same step as the database;
``memory_vectors_version`` (bumped by a trigger for every vector written or deleted) and the
newest memory id tell a search when another process wrote, and the matrix is loaded again.

An embedding model that fails (it does not load, the provider refuses) turns semantic recall
off for the life of the process, with one warning: full-text search goes on alone, and the
memories written meanwhile are embedded at the next start."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from clawbot.errors import ClawbotError
from clawbot.memory.chunks import embedded_texts
from clawbot.store.protocols.memories import Embedder
from clawbot.store.sql import Connection, SqlDatabase

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from clawbot.store.protocols.memories import Vectors

log = logging.getLogger("clawbot.memory")

BACKFILL_BATCH = 256
"""Memories embedded per round of a backfill."""
WORN_ROWS = 64
"""Blank rows a block may gather (and at most half its rows) before it is loaded afresh."""
_STATE = (
    "SELECT (SELECT n FROM memory_vectors_version), (SELECT coalesce(max(id), 0) FROM memories)"
)
_MISSING = (
    "SELECT m.id, m.key, m.text FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_vectors"
    " v WHERE v.memory_id = m.id AND v.model = ?) AND m.id > ? ORDER BY m.id LIMIT ?"
)
_EVERY = (
    "SELECT m.id, m.key, m.text FROM memories m WHERE ? != '' AND m.id > ? ORDER BY m.id LIMIT ?"
)
_INSERT = "INSERT INTO memory_vectors (memory_id, chunk, model, vector) VALUES (?, ?, ?, ?)"


@dataclass(frozen=True)
class State:
    """What the vectors looked like: the version counter and the newest memory's id."""

    version: int
    newest: int


@dataclass(frozen=True)
class Near:
    """A memory and the best similarity of its pieces to a query."""

    memory_id: int
    similarity: float


class _Unembedded(NamedTuple):
    """A memory a backfill embeds, as ``_MISSING`` and ``_EVERY`` select it."""

    memory_id: int
    key: str
    text: str


class _Place(NamedTuple):
    """Where a memory's vectors are in the matrix: its namespace's block and their rows."""

    namespace: str
    rows: list[int]


def read_state(db: Connection) -> State:
    version, newest = db.execute(_STATE).fetchone()
    return State(int(version), int(newest))


def store_blobs(db: Connection, memory_id: int, model: str, vectors: Vectors) -> None:
    """One memory's vectors as float32 blobs (what every backend keeps), replacing its old
    ones, inside the caller's transaction."""
    db.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
    db.executemany(
        _INSERT,
        [
            (memory_id, chunk, model, row.astype("<f4").tobytes())
            for chunk, row in enumerate(vectors)
        ],
    )


class VectorLookup(Protocol):
    """Where the nearest vectors are found: this process's matrix, or the database itself
    (pgvector). ``state`` is what the stored vectors were when the lookup was last in step
    with them (None: :meth:`load` before the next search); a write between ``before`` and
    ``after`` keeps it in step when nobody else wrote between. ``reloads``: whether another
    process's write makes it load again (the matrix; pgvector reads the database's own)."""

    state: State | None
    reloads: bool

    async def load(self, database: SqlDatabase, model: str) -> None:
        """Get in step with the stored vectors of ``model`` (the matrix reads them all)."""
        ...

    def store(self, db: Connection, memory_id: int, model: str, vectors: Vectors) -> None:
        """Write one memory's vectors (replacing any), inside the caller's transaction."""
        ...

    def write(
        self, before: State, after: State, memory_id: int, namespace: str, vectors: Vectors
    ) -> None: ...

    def drop(self, before: State, after: State, memory_ids: Sequence[int]) -> None: ...

    def invalidate(self) -> None: ...

    def rows_held(self) -> int:
        """Vectors held in this process's memory."""
        ...

    def nearest(
        self, db: Connection, query: Vectors, namespaces: Sequence[str] | None, count: int
    ) -> list[Near]:
        """The ``count`` memories (of ``namespaces``; None: all) nearest to ``query``."""
        ...

    def similarity(
        self, db: Connection, query: Vectors, memory_ids: Sequence[int]
    ) -> dict[int, float]:
        """The best similarity of each memory's pieces to ``query`` (absent: no vectors)."""
        ...


class _Block:
    """The rows of one namespace's vectors, in a buffer that grows by half when full; a blanked
    row (its memory forgotten or rewritten) has owner -1 and is never matched."""

    def __init__(self, dims: int, capacity: int = 64) -> None:
        import numpy as np

        self.rows: Vectors = np.zeros((capacity, dims), dtype=np.float32)
        self.owner: NDArray[np.int64] = np.full(capacity, -1, dtype=np.int64)
        self.size = 0
        self.blanked = 0

    def append(self, memory_id: int, vectors: Vectors) -> list[int]:
        import numpy as np

        needed = self.size + len(vectors)
        if needed > len(self.rows):
            capacity = max(needed, len(self.rows) + len(self.rows) // 2)
            rows = np.zeros((capacity, self.rows.shape[1]), dtype=np.float32)
            owner = np.full(capacity, -1, dtype=np.int64)
            rows[: self.size] = self.rows[: self.size]
            owner[: self.size] = self.owner[: self.size]
            self.rows, self.owner = rows, owner
        start, self.size = self.size, needed
        self.rows[start:needed] = vectors
        self.owner[start:needed] = memory_id
        return list(range(start, needed))

    def blank(self, rows: list[int]) -> None:
        self.owner[rows] = -1
        self.rows[rows] = 0.0
        self.blanked += len(rows)

    def best(self, query: Vectors, count: int) -> list[tuple[float, int]]:
        """(similarity, memory id) of the ``count`` best live rows."""
        import numpy as np

        if self.size == 0:
            return []
        scores = self.rows[: self.size] @ query
        rows = None
        if self.blanked:  # rank live rows only: a partition over many equal scores is slow
            rows = np.flatnonzero(self.owner[: self.size] >= 0)
            scores = scores[rows]
        keep = min(len(scores), count)
        if keep == 0:
            return []
        top = np.argpartition(scores, len(scores) - keep)[len(scores) - keep :]
        at = top if rows is None else rows[top]
        return [(float(s), int(o)) for s, o in zip(scores[top], self.owner[at], strict=True)]


class VectorMatrix:
    """Every piece's vector, a block of rows per namespace, so a search of a few namespaces
    multiplies only their rows. Safe to use from the event loop and the database's thread
    (one lock). The :class:`VectorLookup` of SQLite, and of PostgreSQL without pgvector."""

    reloads = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks: dict[str, _Block] = {}
        self._rows_of: dict[int, _Place] = {}
        self._dims = 0
        self.state: State | None = None
        """As of the last load or own write; None: load before use."""

    async def load(self, database: SqlDatabase, model: str) -> None:
        """Read every vector of ``model`` into the matrix."""

        def read_all(db: Connection) -> tuple[State, list[Any]]:
            rows = db.execute(
                "SELECT v.memory_id, m.namespace, v.vector FROM memory_vectors v"
                " JOIN memories m ON m.id = v.memory_id WHERE v.model = ? ORDER BY v.id",
                (model,),
            ).fetchall()
            return read_state(db), rows

        state, rows = await database.read(read_all, flush=False)
        owners, matrix = _matrix(rows)
        self.replace(state, owners, matrix)

    def store(self, db: Connection, memory_id: int, model: str, vectors: Vectors) -> None:
        store_blobs(db, memory_id, model, vectors)

    def replace(self, state: State, owners: list[tuple[int, str]], vectors: Vectors) -> None:
        """Everything, as just read from the database."""
        with self._lock:
            self._blocks = {}
            self._rows_of = {}
            self._dims = vectors.shape[1] if len(vectors) else 0
            by_space: dict[str, list[int]] = {}
            for row, (_, namespace) in enumerate(owners):
                by_space.setdefault(namespace, []).append(row)
            for namespace, picked in by_space.items():
                room = len(picked) + len(picked) // 8  # for the writes to come
                block = self._blocks[namespace] = _Block(self._dims, max(64, room))
                block.rows[: len(picked)] = vectors[picked]
                block.size = len(picked)
                for offset, row in enumerate(picked):
                    memory_id, _ = owners[row]
                    block.owner[offset] = memory_id
                    place = self._rows_of.get(memory_id)
                    if place is None:
                        place = self._rows_of[memory_id] = _Place(namespace, [])
                    place.rows.append(offset)
            self.state = state

    def write(
        self, before: State, after: State, memory_id: int, namespace: str, vectors: Vectors
    ) -> None:
        """One memory's new vectors, written in the database between ``before`` and
        ``after``; when another writer came between, the next search loads everything."""
        with self._lock:
            if self.state != before:
                self.state = None
                return
            worn = self._blank(memory_id)
            if len(vectors):
                if self._dims and self._dims != vectors.shape[1]:
                    self.state = None  # another model's size: load again
                    return
                self._dims = vectors.shape[1]
                self._add(memory_id, namespace, vectors)
            self.state = None if worn else after

    def rows_held(self) -> int:
        """Rows the matrix holds now, blanked ones included (what its memory grows with)."""
        with self._lock:
            return sum(block.size for block in self._blocks.values())

    def invalidate(self) -> None:
        """Load everything again before the next search (after an import, say)."""
        with self._lock:
            self.state = None

    def drop(self, before: State, after: State, memory_ids: Sequence[int]) -> None:
        with self._lock:
            if self.state != before:
                self.state = None
                return
            worn = [self._blank(memory_id) for memory_id in memory_ids]
            self.state = None if any(worn) else after

    def nearest(
        self, db: Connection, query: Vectors, namespaces: Sequence[str] | None, count: int
    ) -> list[Near]:
        """The ``count`` memories (of ``namespaces``; None: all) nearest to ``query``."""
        with self._lock:
            if query.shape[0] != self._dims:
                return []
            names = self._blocks if namespaces is None else namespaces
            found: list[tuple[float, int]] = []
            for name in names:
                block = self._blocks.get(name)
                if block is not None:
                    found += block.best(query, count * 4)  # a memory may have several rows
            found.sort(reverse=True)
            best: dict[int, float] = {}
            for score, memory_id in found:
                if memory_id not in best:
                    best[memory_id] = score
                    if len(best) == count:
                        break
            return [Near(memory_id, score) for memory_id, score in best.items()]

    def similarity(
        self, db: Connection, query: Vectors, memory_ids: Sequence[int]
    ) -> dict[int, float]:
        """The best similarity of each memory's pieces to ``query`` (absent: no vectors)."""
        with self._lock:
            if query.shape[0] != self._dims:
                return {}
            found: dict[int, float] = {}
            for memory_id in memory_ids:
                where = self._rows_of.get(memory_id)
                if where is not None:
                    rows = self._blocks[where.namespace].rows[where.rows]
                    found[memory_id] = float((rows @ query).max())
            return found

    def _add(self, memory_id: int, namespace: str, vectors: Vectors) -> None:
        block = self._blocks.get(namespace)
        if block is None:
            block = self._blocks[namespace] = _Block(vectors.shape[1])
        self._rows_of[memory_id] = _Place(namespace, block.append(memory_id, vectors))

    def _blank(self, memory_id: int) -> bool:
        """Blank a memory's rows; whether their block is now mostly blanks (a rewritten
        memory leaves its old rows behind), so the next search loads it compactly again."""
        where = self._rows_of.pop(memory_id, None)
        if where is None:
            return False
        block = self._blocks[where.namespace]
        block.blank(where.rows)
        return block.blanked > max(WORN_ROWS, block.size // 2)


class SemanticIndex:
    """An embedder and the lookup of the memories' vectors, kept in step with the store."""

    def __init__(
        self, database: SqlDatabase, embedder: Embedder, lookup: VectorLookup | None = None
    ) -> None:
        self.database = database
        self.embedder = embedder
        self.lookup: VectorLookup = lookup if lookup is not None else VectorMatrix()
        self.active = True
        self.failure: ClawbotError | None = None
        self._worked = False
        self._failing = False
        self._syncing = asyncio.Lock()

    def fail(self, exc: ClawbotError) -> None:
        """Semantic recall off for this process, said once."""
        if self.active:
            self.active = False
            self.failure = exc
            log.warning("semantic recall is off, full-text search goes on alone: %s", exc)

    async def embed(self, texts: Sequence[str]) -> Vectors | None:
        """The vectors of ``texts``, or None when the model fails. A model that never
        worked (it cannot load, a wrong name) turns semantic recall off for the process; one
        that worked and fails now (a provider's timeout) leaves only this call without it,
        said once until it answers again."""
        if not self.active:
            return None
        try:
            vectors = await self.embedder.embed(texts)
        except ClawbotError as exc:
            if not self._worked:
                self.fail(exc)
            elif not self._failing:
                self._failing = True
                log.warning("the embedding model failed, full-text search alone meanwhile: %s", exc)
            return None
        self._worked, self._failing = True, False
        return vectors

    async def vectors(self, memories: Sequence[tuple[str, str]]) -> list[Vectors] | None:
        """(key, text) -> the vectors of its pieces, one array a memory; None when the
        model failed (and semantic recall is off)."""
        texts = [embedded_texts(key, text) for key, text in memories]
        flat = await self.embed([piece for pieces in texts for piece in pieces])
        if flat is None:
            return None
        found: list[Vectors] = []
        start = 0
        for pieces in texts:
            found.append(flat[start : start + len(pieces)])
            start += len(pieces)
        return found

    def store(self, db: Connection, memory_id: int, vectors: Vectors) -> None:
        """Write one memory's vectors (replacing any), inside the caller's transaction."""
        self.lookup.store(db, memory_id, self.embedder.name, vectors)

    async def ready(self) -> bool:
        """Load the lookup (after a backfill) when it is not in step; False when semantic
        recall is off."""
        if self.active and self.lookup.state is None:
            await self.refresh(None)
        return self.active

    async def refresh(self, seen: State | None) -> None:
        """Load the lookup again (after a backfill), unless another task did since the
        lookup was ``seen`` (concurrent searches that found it stale load it once)."""
        async with self._syncing:
            if self.lookup.state == seen:
                await self._sync()

    async def sync(self, *, rebuild: bool = False) -> int:
        """Embed the memories without vectors of this model (every memory on ``rebuild``),
        then load the lookup; how many memories were embedded."""
        async with self._syncing:
            return await self._sync(rebuild=rebuild)

    async def _sync(self, *, rebuild: bool = False) -> int:
        if not self.active:
            return 0
        embedded = await self._backfill(_EVERY if rebuild else _MISSING)
        if self.active:
            await self.lookup.load(self.database, self.embedder.name)
        return embedded

    async def _backfill(self, which: str) -> int:
        """Embed the memories ``which`` selects, a batch at a time (each memory's vectors
        replace its old ones, so a model that fails halfway leaves the rest as they were)."""
        embedded = 0
        after = 0
        while self.active:
            rows = await self.database.fetchall(
                which, (self.embedder.name, after, BACKFILL_BATCH), flush=False
            )
            if not rows:
                break
            items = [_Unembedded(int(i), str(key), str(text)) for i, key, text in rows]
            after = items[-1].memory_id
            vectors = await self.vectors([(item.key, item.text) for item in items])
            if vectors is None:
                break

            def write(
                db: Connection,
                found: list[Vectors] = vectors,
                items: list[_Unembedded] = items,
            ) -> int:
                written = 0
                for item, rows_ in zip(items, found, strict=True):
                    still = db.execute(
                        "SELECT 1 FROM memories WHERE id = ? AND text = ?",
                        (item.memory_id, item.text),
                    ).fetchone()
                    if still is not None:  # changed meanwhile: its writer embedded it
                        self.store(db, item.memory_id, rows_)
                        written += 1
                return written

            embedded += await self.database.transaction(write, background=True)
        return embedded


def _matrix(rows: list[Any]) -> tuple[list[tuple[int, str]], Vectors]:
    """(memory id, namespace, blob) rows -> their owners and one matrix (a blob of another
    size than the first, from a damaged row, is left out)."""
    import numpy as np

    if not rows:
        return [], np.zeros((0, 1), dtype=np.float32)
    _, _, first = rows[0]
    size = len(first)
    usable = [(m, n, blob) for m, n, blob in rows if len(blob) == size]
    matrix = np.frombuffer(b"".join(blob for _, _, blob in usable), dtype="<f4")
    owners = [(int(memory_id), str(namespace)) for memory_id, namespace, _ in usable]
    return owners, matrix.reshape(len(usable), size // 4).astype(np.float32)
