"""Memories' full-text search on PostgreSQL: the ``search`` tsvector of migration 11 (key and
tags weighted above the text) matched by any of the query's words and ranked by
``ts_rank``, the asking session's and agent's memories boosted as on SQLite
(``clawbot.store.memories``). Each word is quoted into the ``tsquery``, so no query is ever
search syntax. Scores are negated: lower is better, as the shared ranking expects."""

from __future__ import annotations

from collections.abc import Sequence

import clawbot.store.memories as shared
from clawbot.memory.records import MemoryQuery
from clawbot.store.memories import AGENT_BOOST, COLUMNS, SESSION_BOOST, Match, as_match, within
from clawbot.store.sql import Connection

_BOOST = (
    f"(1.0 + CASE WHEN m.session_key = ? THEN {SESSION_BOOST} ELSE 0 END"
    f" + CASE WHEN m.agent_id = ? THEN {AGENT_BOOST} ELSE 0 END)"
)


def tsquery(words: Sequence[str]) -> str:
    """The ``tsquery`` matching any of ``words``, each quoted (a word holds no quote)."""
    return " | ".join(f"'{word}'" for word in words)


def tsvector_search(db: Connection, query: MemoryQuery, words: Sequence[str]) -> list[Match]:
    """The best matches, chosen as on SQLite: each word's memories counted (up to
    ``FREQUENT``), the rarest ``MAX_TERMS`` searched; when every word is that frequent,
    only the ``NEWEST`` memories holding the rarest are ranked."""
    counted = db.execute(
        "SELECT w, (SELECT count(*) FROM (SELECT 1 FROM memories"
        " WHERE search @@ to_tsquery('simple', quote_literal(w)) LIMIT ?) f)"
        " FROM unnest(?::text[]) WITH ORDINALITY AS words(w, n) ORDER BY n",
        (shared.FREQUENT + 1, list(words)),
    ).fetchall()
    by_rarity = sorted((found, n, word) for n, (word, found) in enumerate(counted) if found)
    terms = [word for found, _, word in by_rarity if found <= shared.FREQUENT][: shared.MAX_TERMS]
    newest = ""
    bound: tuple[object, ...] = ()
    if not terms:
        if not by_rarity:
            return []  # no memory holds any of the words
        terms = [by_rarity[0][2]]
        oldest = db.execute(
            "SELECT id FROM memories WHERE search @@ to_tsquery('simple', ?)"
            " ORDER BY id DESC LIMIT 1 OFFSET ?",
            (tsquery(terms), shared.NEWEST - 1),
        ).fetchone()
        if oldest is not None:
            newest, bound = " AND m.id >= ?", (oldest[0],)
    where, filters = within(query.namespaces, query.tags)
    rows = db.execute(
        f"SELECT {COLUMNS}, -ts_rank(m.search, q) * {_BOOST} AS score"
        " FROM memories m, to_tsquery('simple', ?) q"
        f" WHERE m.search @@ q{newest}{where} ORDER BY score, m.id DESC LIMIT ?",
        (query.session_key, query.agent_id, tsquery(terms), *bound, *filters, query.limit),
    ).fetchall()
    return [as_match(*row) for row in rows]
