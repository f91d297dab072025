"""Memories (``memories``, ``memories_fts``): texts agents keep under a namespaced key,
searched with SQLite FTS5 and ranked with bm25, the asking session's and agent's first.

A query is never handed to FTS5 as written: its words are taken out one by one and each is
quoted, so ``"``, ``*``, ``NEAR``, ``AND``/``OR``/``NOT``, ``-``, ``:`` and parentheses are
only ever words to look for, never syntax that could fail. The words are joined with OR
(bm25 ranks the memories that hold more of them, and rarer ones, first).

What a search costs is what bm25 scores: every memory that holds one of the words. So common
English words are left out, and so is any word found in more than ``FREQUENT`` memories
while rarer ones remain (bm25 gives such a word next to no weight anyway); at most
``MAX_TERMS`` of the rarest words are searched. When every word is that frequent, only the
``NEWEST`` memories holding the rarest one are ranked. Counting a word's memories stops at
``FREQUENT``, so that count is cheap too.

With an embedding model set (:meth:`SqlMemories.use_embeddings`), a search is hybrid: the
best matches by words and the nearest by meaning (``clawbot.store.memory_vectors``) are
blended into one score (``clawbot.memory.ranking``), the boost applied after."""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from clawbot.memory.ranking import Candidate, blend, coverage
from clawbot.memory.records import Memory, MemoryHit, MemoryQuery
from clawbot.redaction import redactor
from clawbot.store.memory_vectors import SemanticIndex, VectorLookup, read_state
from clawbot.store.protocols.memories import Embedder
from clawbot.store.rows import now
from clawbot.store.sql import Connection, SqlDatabase

if TYPE_CHECKING:
    from clawbot.store.protocols.memories import Vectors

MAX_WORDS = 16
"""Words of a query looked at (the first ones)."""
MAX_TERMS = 6
"""Words of a query searched for (the rarest ones)."""
FREQUENT = 250
"""A word in more memories than this is left out of a search while rarer ones remain."""
NEWEST = 1000
"""When every word is frequent: how many of the newest memories with the rarest are ranked."""
TOP = 100
"""The best matches by bm25 alone that the session and agent boost re-ranks (at least)."""
SESSION_BOOST = 0.5
"""A memory written in the asking session ranks as if this much more relevant (x1.5)."""
AGENT_BOOST = 0.25
"""A memory written by the asking agent: x1.25."""
# bm25 weights of the columns key, text, tags: a word in the key or a tag says more.
_BM25 = "bm25(memories_fts, 3.0, 1.0, 2.0)"
_BOOST = f"(1.0 + {SESSION_BOOST} * (m.session_key = ?) + {AGENT_BOOST} * (m.agent_id = ?))"
COLUMNS = (
    "m.namespace, m.key, m.text, m.tags, m.session_key, m.agent_id, m.created_at, m.updated_at,"
    " m.id"
)
_WORD = re.compile(r"\w+")
_COMMON_WORDS = (
    "a an and are as at be been but by can could did do does for from had has have he her "
    "him his how i if in into is it its me my no not of on or our she so than that the "
    "their them then there these they this to too us was we were what when where which "
    "who why will with would you your"
)
_STOPWORDS = frozenset(_COMMON_WORDS.split())
_UPSERT = (
    "INSERT INTO memories (namespace, key, text, tags, session_key, agent_id, created_at,"
    " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (namespace, key) DO UPDATE SET text = excluded.text, tags = excluded.tags,"
    " session_key = excluded.session_key, agent_id = excluded.agent_id,"
    " updated_at = excluded.updated_at"
)
_RESTORE = _UPSERT + ", created_at = excluded.created_at"


def query_words(text: str) -> list[str]:
    """The distinct words of ``text`` to search for, lower-cased, in order: common words
    left out unless nothing else is left; at most ``MAX_WORDS``."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))
    kept = [word for word in words if word not in _STOPWORDS] or words
    return kept[:MAX_WORDS]


def _any_of(words: Sequence[str]) -> str:
    """The FTS5 expression matching any of ``words``, each quoted (a word holds no ``"``)."""
    return " OR ".join(f'"{word}"' for word in words)


class MemoryRow(NamedTuple):
    """One memory as ``COLUMNS`` selects it."""

    namespace: str
    key: str
    text: str
    tags: str
    session_key: str
    agent_id: str
    created_at: str
    updated_at: str
    id: int

    def memory(self) -> Memory:
        return Memory(
            namespace=self.namespace,
            key=self.key,
            text=self.text,
            tags=tuple(self.tags.split()),
            session_key=self.session_key,
            agent_id=self.agent_id,
            created_at=datetime.fromisoformat(self.created_at),
            updated_at=datetime.fromisoformat(self.updated_at),
        )


class Match(NamedTuple):
    """A memory full-text search found, with its SQL ``score``: bm25 times the session and
    agent boost, lower is better (as FTS5 ranks)."""

    row: MemoryRow
    score: float


TextSearch = Callable[[Connection, MemoryQuery, Sequence[str]], "list[Match]"]
"""A backend's full-text search: the best matches of a query's words (SQLite's FTS5 here,
PostgreSQL's in ``clawbot.store.postgres.search``), their ``score`` lower for better."""


def as_match(*columns: Any) -> Match:
    """The ``Match`` of a row of ``COLUMNS`` and its score."""
    *memory, score = columns
    return Match(MemoryRow(*memory), float(score))


class MemoryWrite(NamedTuple):
    """The values ``_UPSERT`` and ``_RESTORE`` write for one memory."""

    namespace: str
    key: str
    text: str
    tags: str
    session_key: str
    agent_id: str
    created_at: str
    updated_at: str


def _row(memory: Memory) -> MemoryWrite:
    return MemoryWrite(
        memory.namespace,
        memory.key,
        redactor.redact(memory.text),
        " ".join(memory.tags),
        memory.session_key,
        memory.agent_id,
        memory.created_at.astimezone(UTC).isoformat(),
        memory.updated_at.astimezone(UTC).isoformat(),
    )


def within(namespaces: Sequence[str] | None, tags: Sequence[str]) -> tuple[str, list[str]]:
    """The SQL conditions (and their parameters) for a namespace and tag filter."""
    sql = ""
    params: list[str] = []
    if namespaces is not None and not namespaces:
        sql += " AND 1 = 0"  # no namespace to look in: nothing, and never `IN ()`
    elif namespaces is not None:
        sql += f" AND m.namespace IN ({', '.join('?' * len(namespaces))})"
        params += namespaces
    if tags:
        sql += " AND (" + " OR ".join("(' ' || m.tags || ' ') LIKE ?" for _ in tags) + ")"
        params += [f"% {tag} %" for tag in tags]
    return sql, params


def fts5_search(db: Connection, query: MemoryQuery, words: Sequence[str]) -> list[Match]:
    """SQLite's full-text search (FTS5, bm25). The best matches: the words counted (up to
    ``FREQUENT`` each), the rarest searched, bm25's best re-ranked by the session and agent
    boost."""
    counted = db.execute(
        "SELECT w.value, (SELECT count(*) FROM (SELECT rowid FROM memories_fts"
        " WHERE memories_fts MATCH '\"' || w.value || '\"' LIMIT ?)) AS found"
        " FROM json_each(?) w",
        (FREQUENT + 1, json.dumps(words)),
    ).fetchall()
    by_rarity = sorted((found, n, word) for n, (word, found) in enumerate(counted) if found)
    terms = [word for found, _, word in by_rarity if found <= FREQUENT][:MAX_TERMS]
    newest = ""
    bound: tuple[object, ...] = ()
    if not terms:
        if not by_rarity:
            return []  # no memory holds any of the words
        _, _, rarest = by_rarity[0]
        terms = [rarest]
        oldest = db.execute(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (_any_of(terms), NEWEST - 1),
        ).fetchone()
        if oldest is not None:
            (oldest_rowid,) = oldest
            newest, bound = " AND memories_fts.rowid >= ?", (oldest_rowid,)
    where, filters = within(query.namespaces, query.tags)
    match = (_any_of(terms), *bound)
    boost = (query.session_key, query.agent_id)
    best = max(query.limit * 10, TOP)
    rows = db.execute(
        f"SELECT {COLUMNS}, f.rank * {_BOOST} AS score FROM (SELECT rowid, {_BM25} AS rank"
        f" FROM memories_fts WHERE memories_fts MATCH ?{newest} ORDER BY rank LIMIT ?) f"
        f" JOIN memories m ON m.id = f.rowid WHERE 1 = 1{where} ORDER BY score LIMIT ?",
        (*boost, *match, best, *filters, query.limit),
    ).fetchall()
    if len(rows) < query.limit and where:
        # bm25's best were mostly outside the filter: rank every match within it
        rows = db.execute(
            f"SELECT {COLUMNS}, {_BM25} * {_BOOST} AS score"
            " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH ?{newest}{where} ORDER BY score LIMIT ?",
            (*boost, *match, *filters, query.limit),
        ).fetchall()
    return [as_match(*row) for row in rows]


def boost(row: MemoryRow, query: MemoryQuery) -> float:
    """The session and agent factor of a row, as ``_BOOST`` computes it in SQL."""
    session = SESSION_BOOST if row.session_key == query.session_key else 0.0
    agent = AGENT_BOOST if row.agent_id == query.agent_id else 0.0
    return 1.0 + session + agent


def _hybrid(
    db: Connection,
    query: MemoryQuery,
    words: Sequence[str],
    vector: Vectors,
    lookup: VectorLookup,
    check: bool,
    search: TextSearch,
) -> list[MemoryHit] | None:
    """The best matches by the blend of bm25 and meaning (``clawbot.memory.ranking``);
    None when ``check`` finds another process changed the vectors."""
    if check and lookup.reloads and read_state(db) != lookup.state:
        return None
    wanted = max(query.limit * 2, 10)
    by_words = search(db, replace(query, limit=wanted), words) if words else []
    rows = {m.row.id: m.row for m in by_words}
    bm25 = {m.row.id: -m.score / boost(m.row, query) for m in by_words}
    near = lookup.nearest(db, vector, query.namespaces, wanted)
    others = [n.memory_id for n in near if n.memory_id not in rows]
    if others:
        where, filters = within(query.namespaces, query.tags)
        found = db.execute(
            f"SELECT {COLUMNS} FROM memories m WHERE m.id IN ({', '.join('?' * len(others))})"
            f"{where}",
            (*others, *filters),
        ).fetchall()
        rows.update((stored.id, stored) for stored in map(MemoryRow._make, found))
    similarity = {n.memory_id: n.similarity for n in near}
    similarity.update(lookup.similarity(db, vector, [i for i in rows if i not in similarity]))
    candidates = []
    for memory_id, row in rows.items():
        held = 0.0  # the words count only for what full-text search found
        if memory_id in bm25:  # (at least one of them, if in another spelling: diacritics)
            held = max(coverage(words, row.key, row.text, row.tags), 1 / len(words))
        candidates.append(
            Candidate(
                memory_id=memory_id,
                bm25=bm25.get(memory_id, 0.0),
                coverage=held,
                similarity=similarity.get(memory_id, 0.0),
                boost=boost(row, query),
            )
        )
    ranked = blend(candidates, query.limit)
    return [MemoryHit(memory=rows[r.memory_id].memory(), score=r.score) for r in ranked]


class SqlMemories:
    """The memories of every agent, their full-text index and, when an embedding model is
    set (:meth:`use_embeddings`), their vectors for semantic recall."""

    def __init__(
        self,
        database: SqlDatabase,
        search: TextSearch,
        lookup: Callable[[], VectorLookup] | None = None,
    ) -> None:
        self._database = database
        self._search = search
        self._lookup = lookup
        self._semantic: SemanticIndex | None = None

    def use_embeddings(self, embedder: Embedder | None) -> None:
        """Rank searches by words and meaning with ``embedder`` (None: words alone). Nothing
        loads now: the model and the vectors load at the first search or write."""
        self._semantic = None
        if embedder is not None:
            lookup = self._lookup() if self._lookup is not None else None
            self._semantic = SemanticIndex(self._database, embedder, lookup)

    @property
    def semantic(self) -> SemanticIndex | None:
        """The embedder and vectors searches rank with; None when semantic recall is off."""
        return self._semantic

    async def reindex(self) -> int | None:
        """Embed every memory again (after a change of model, say) and load the vectors;
        how many memories, or None when semantic recall is off. The model's EmbeddingError
        when it fails."""
        semantic = self._semantic
        if semantic is None:
            return None
        embedded = await semantic.sync(rebuild=True)
        if semantic.failure is not None:
            raise semantic.failure
        return embedded

    async def put(
        self,
        *,
        namespace: str,
        key: str,
        text: str,
        tags: Sequence[str],
        session_key: str,
        agent_id: str,
    ) -> Memory:
        """Store a memory under ``namespace:key``, replacing the text and tags of one stored
        there before (it keeps its creation time); what is stored now."""
        stamp = now()
        text = redactor.redact(text)  # a key the user pasted is not kept, as in transcripts
        params = (namespace, key, text, " ".join(tags), session_key, agent_id, stamp, stamp)
        semantic = self._semantic
        vectors = None
        if semantic is not None and await semantic.ready():
            found = await semantic.vectors([(key, text)])
            vectors = found[0] if found else None

        def upsert(db: Connection) -> Memory:
            before = read_state(db) if semantic is not None else None
            db.execute(_UPSERT, params)
            row = db.execute(
                f"SELECT {COLUMNS} FROM memories m WHERE m.namespace = ? AND m.key = ?",
                (namespace, key),
            ).fetchone()
            stored = MemoryRow(*row)
            if semantic is not None and before is not None:
                memory_id = stored.id
                if vectors is not None:
                    semantic.store(db, memory_id, vectors)
                    semantic.lookup.write(before, read_state(db), memory_id, namespace, vectors)
                else:  # its old vectors are gone (the trigger): out of the lookup too
                    semantic.lookup.drop(before, read_state(db), [memory_id])
            return stored.memory()

        return await self._database.grouped(upsert)

    async def restore(self, memories: Sequence[Memory]) -> int:
        """Write memories exactly as given (times, session and agent included), replacing
        any under the same keys, in one transaction: what an import does. How many."""
        rows = [_row(memory) for memory in memories]
        semantic = self._semantic
        vectors = None
        if semantic is not None and rows and await semantic.ready():
            vectors = await semantic.vectors([(row.key, row.text) for row in rows])

        def write(db: Connection) -> int:
            db.executemany(_RESTORE, rows)
            if semantic is not None:
                for row, found in zip(rows, vectors or (), strict=False):
                    (memory_id,) = db.execute(
                        "SELECT id FROM memories WHERE namespace = ? AND key = ?",
                        (row.namespace, row.key),
                    ).fetchone()
                    semantic.store(db, memory_id, found)
                semantic.lookup.invalidate()  # many changed: load again at the next search
            return len(rows)

        return await self._database.transaction(write, background=True)

    async def get(self, namespace: str, key: str) -> Memory | None:
        row = await self._database.fetchone(
            f"SELECT {COLUMNS} FROM memories m WHERE m.namespace = ? AND m.key = ?",
            (namespace, key),
            small=True,
            flush=False,
        )
        return MemoryRow(*row).memory() if row is not None else None

    async def forget(self, namespace: str, key: str) -> bool:
        """Delete one memory; False when there was none."""
        semantic = self._semantic
        if semantic is None:
            deleted = await self._database.write(
                "DELETE FROM memories WHERE namespace = ? AND key = ?", (namespace, key)
            )
            return deleted > 0

        def delete(db: Connection) -> bool:
            before = read_state(db)
            row = db.execute(
                "DELETE FROM memories WHERE namespace = ? AND key = ? RETURNING id",
                (namespace, key),
            ).fetchone()
            if row is None:
                return False
            (memory_id,) = row
            semantic.lookup.drop(before, read_state(db), [int(memory_id)])
            return True

        return await self._database.transaction(delete)

    async def search(self, query: MemoryQuery) -> builtins.list[MemoryHit]:
        """The memories that best match the query's words, best first; none for a query
        without words. One hop to the database thread: counting, then ranking."""
        words = query_words(query.text)
        semantic = self._semantic
        if semantic is not None and query.limit >= 1 and query.text.strip():
            hits = await self._hybrid_search(semantic, query, words)
            if hits is not None:
                return hits
        if not words or query.limit < 1:
            return []
        search = self._search
        found = await self._database.read(lambda db: search(db, query, words), flush=False)
        return [MemoryHit(memory=m.row.memory(), score=-m.score) for m in found]

    async def _hybrid_search(
        self, semantic: SemanticIndex, query: MemoryQuery, words: Sequence[str]
    ) -> builtins.list[MemoryHit] | None:
        """The hybrid ranking's hits; None when semantic recall is (or just went) off."""
        if not await semantic.ready():
            return None
        found = await semantic.embed([query.text])
        if found is None:
            return None
        vector = found[0]
        for check in (True, False):  # another process wrote: load its vectors, once
            seen = semantic.lookup.state

            def rank(db: Connection, check: bool = check) -> list[MemoryHit] | None:
                return _hybrid(db, query, words, vector, semantic.lookup, check, self._search)

            ranked = await self._database.read(rank, flush=False)
            if ranked is not None:
                return ranked
            await semantic.refresh(seen)
            if not semantic.active:
                return None
        return None

    async def written_in(
        self, session_key: str, namespaces: Sequence[str] | None, limit: int
    ) -> builtins.list[Memory]:
        """The memories last written in one session, newest first."""
        where, params = within(namespaces, ())
        rows = await self._database.fetchall(
            f"SELECT {COLUMNS} FROM memories m WHERE m.session_key = ?{where}"
            " ORDER BY m.updated_at DESC, m.id DESC LIMIT ?",
            (session_key, *params, limit),
            flush=False,
        )
        return [MemoryRow(*row).memory() for row in rows]

    async def list(self, namespace: str | None = None) -> builtins.list[Memory]:
        """Every memory (of one namespace when given), by namespace and key."""
        where, params = within((namespace,) if namespace is not None else None, ())
        rows = await self._database.fetchall(
            f"SELECT {COLUMNS} FROM memories m WHERE 1 = 1{where} ORDER BY m.namespace, m.key",
            params,
            flush=False,
        )
        return [MemoryRow(*row).memory() for row in rows]

    async def count(self) -> int:
        (total,) = await self._database.fetchone("SELECT count(*) FROM memories", flush=False)
        return int(total)
