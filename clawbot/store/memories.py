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
``FREQUENT``, so that count is cheap too."""

from __future__ import annotations

import builtins
import json
import re
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from clawbot.memory import Memory, MemoryHit, MemoryQuery
from clawbot.redaction import redactor
from clawbot.store.database import Database
from clawbot.store.rows import now

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
_COLUMNS = (
    "m.namespace, m.key, m.text, m.tags, m.session_key, m.agent_id, m.created_at, m.updated_at"
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


def _memory(row: Sequence[Any]) -> Memory:
    namespace, key, text, tags, session_key, agent_id, created, updated = row[:8]
    return Memory(
        namespace=namespace,
        key=key,
        text=text,
        tags=tuple(tags.split()),
        session_key=session_key,
        agent_id=agent_id,
        created_at=datetime.fromisoformat(created),
        updated_at=datetime.fromisoformat(updated),
    )


def _row(memory: Memory) -> tuple[str, ...]:
    return (
        memory.namespace,
        memory.key,
        redactor.redact(memory.text),
        " ".join(memory.tags),
        memory.session_key,
        memory.agent_id,
        memory.created_at.astimezone(UTC).isoformat(),
        memory.updated_at.astimezone(UTC).isoformat(),
    )


def _within(namespaces: Sequence[str] | None, tags: Sequence[str]) -> tuple[str, list[str]]:
    """The SQL conditions (and their parameters) for a namespace and tag filter."""
    sql = ""
    params: list[str] = []
    if namespaces is not None and not namespaces:
        sql += " AND 0"  # no namespace to look in: nothing, and never `IN ()`
    elif namespaces is not None:
        sql += f" AND m.namespace IN ({', '.join('?' * len(namespaces))})"
        params += namespaces
    if tags:
        sql += " AND (" + " OR ".join("(' ' || m.tags || ' ') LIKE ?" for _ in tags) + ")"
        params += [f"% {tag} %" for tag in tags]
    return sql, params


def _search(db: sqlite3.Connection, query: MemoryQuery, words: Sequence[str]) -> list[Any]:
    """The rows of the best matches: the words counted (up to ``FREQUENT`` each), the
    rarest searched, bm25's best re-ranked by the session and agent boost."""
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
        terms = [by_rarity[0][2]]
        row = db.execute(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (_any_of(terms), NEWEST - 1),
        ).fetchone()
        if row is not None:
            newest, bound = " AND memories_fts.rowid >= ?", (row[0],)
    where, filters = _within(query.namespaces, query.tags)
    match = (_any_of(terms), *bound)
    boost = (query.session_key, query.agent_id)
    best = max(query.limit * 10, TOP)
    rows = db.execute(
        f"SELECT {_COLUMNS}, f.rank * {_BOOST} AS score FROM (SELECT rowid, {_BM25} AS rank"
        f" FROM memories_fts WHERE memories_fts MATCH ?{newest} ORDER BY rank LIMIT ?) f"
        f" JOIN memories m ON m.id = f.rowid WHERE 1 = 1{where} ORDER BY score LIMIT ?",
        (*boost, *match, best, *filters, query.limit),
    ).fetchall()
    if len(rows) < query.limit and where:
        # bm25's best were mostly outside the filter: rank every match within it
        rows = db.execute(
            f"SELECT {_COLUMNS}, {_BM25} * {_BOOST} AS score"
            " FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH ?{newest}{where} ORDER BY score LIMIT ?",
            (*boost, *match, *filters, query.limit),
        ).fetchall()
    return rows


class SqliteMemories:
    """The memories of every agent, and their full-text index."""

    def __init__(self, database: Database) -> None:
        self._database = database

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

        def upsert(db: sqlite3.Connection) -> Memory:
            db.execute(_UPSERT, params)
            row = db.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE m.namespace = ? AND m.key = ?",
                (namespace, key),
            ).fetchone()
            return _memory(row)

        return await self._database.grouped(upsert)

    async def restore(self, memories: Sequence[Memory]) -> int:
        """Write memories exactly as given (times, session and agent included), replacing
        any under the same keys, in one transaction: what an import does. How many."""
        rows = [_row(memory) for memory in memories]

        def write(db: sqlite3.Connection) -> int:
            db.executemany(_RESTORE, rows)
            return len(rows)

        return await self._database.transaction(write, background=True)

    async def get(self, namespace: str, key: str) -> Memory | None:
        row = await self._database.fetchone(
            f"SELECT {_COLUMNS} FROM memories m WHERE m.namespace = ? AND m.key = ?",
            (namespace, key),
            small=True,
            flush=False,
        )
        return _memory(row) if row is not None else None

    async def forget(self, namespace: str, key: str) -> bool:
        """Delete one memory; False when there was none."""
        deleted = await self._database.write(
            "DELETE FROM memories WHERE namespace = ? AND key = ?", (namespace, key)
        )
        return deleted > 0

    async def search(self, query: MemoryQuery) -> builtins.list[MemoryHit]:
        """The memories that best match the query's words, best first; none for a query
        without words. One hop to the database thread: counting, then ranking."""
        words = query_words(query.text)
        if not words or query.limit < 1:
            return []
        rows = await self._database.read(lambda db: _search(db, query, words), flush=False)
        return [MemoryHit(memory=_memory(row), score=-float(row[8])) for row in rows]

    async def written_in(
        self, session_key: str, namespaces: Sequence[str] | None, limit: int
    ) -> builtins.list[Memory]:
        """The memories last written in one session, newest first."""
        where, params = _within(namespaces, ())
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM memories m WHERE m.session_key = ?{where}"
            " ORDER BY m.updated_at DESC, m.id DESC LIMIT ?",
            (session_key, *params, limit),
            flush=False,
        )
        return [_memory(row) for row in rows]

    async def list(self, namespace: str | None = None) -> builtins.list[Memory]:
        """Every memory (of one namespace when given), by namespace and key."""
        where, params = _within((namespace,) if namespace is not None else None, ())
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM memories m WHERE 1 = 1{where} ORDER BY m.namespace, m.key",
            params,
            flush=False,
        )
        return [_memory(row) for row in rows]

    async def count(self) -> int:
        (total,) = await self._database.fetchone("SELECT count(*) FROM memories", flush=False)
        return int(total)
