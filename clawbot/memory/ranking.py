"""Hybrid ranking: full-text relevance (bm25) and meaning (the cosine similarity of
embeddings) blended into one score per memory, then the asking session's and agent's boost.

A normalized score blend, not reciprocal rank fusion: rank fusion rewards being in both
lists, so a memory that merely shares one word with the query (found by bm25, and last but
present among the nearest vectors) beats the paraphrase that answers it. Here each side
says how good a match is, on a scale that means something alone:

- meaning: the best similarity of the memory's pieces to the query, 0 under
  ``MIN_SIMILARITY`` (below it, texts are about other things);
- words: bm25 relative to the best bm25 of this search, times the share of the query's words
  the memory holds (one word of four, shared by chance, counts a quarter).

The score is ``VECTOR_WEIGHT`` x meaning + (1 - ``VECTOR_WEIGHT``) x words, times the boost."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

VECTOR_WEIGHT = 0.5
MIN_SIMILARITY = 0.25
"""Cosine similarity under which a memory counts as unrelated in meaning (for the local
model, unrelated texts score about 0 to 0.15, paraphrases 0.35 and up)."""
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Candidate:
    """A memory one of the two searches found, with what each side says of it."""

    memory_id: int
    bm25: float
    """Full-text relevance, higher is better; 0 when full-text search did not find it."""
    coverage: float
    """The share of the query's words the memory holds, 0 to 1."""
    similarity: float
    """The best cosine similarity of its pieces to the query."""
    boost: float
    """The session and agent factor (1 when neither is the asker's)."""


@dataclass(frozen=True)
class Ranked:
    memory_id: int
    score: float


def coverage(query_words: Sequence[str], *texts: str) -> float:
    """The share of ``query_words`` (lower-case) found among the words of ``texts``."""
    if not query_words:
        return 0.0
    held = {word for text in texts for word in _WORD.findall(text.lower())}
    return sum(word in held for word in query_words) / len(query_words)


def blend(candidates: Sequence[Candidate], limit: int) -> list[Ranked]:
    """The best ``limit`` candidates by the blended score, best first; a candidate neither
    side vouches for (no words, too little meaning) is left out."""
    best_bm25 = max((c.bm25 for c in candidates), default=0.0) or 1.0
    ranked: list[Ranked] = []
    for c in candidates:
        meaning = c.similarity if c.similarity >= MIN_SIMILARITY else 0.0
        words = (c.bm25 / best_bm25) * c.coverage
        score = (VECTOR_WEIGHT * meaning + (1 - VECTOR_WEIGHT) * words) * c.boost
        if score > 0:
            ranked.append(Ranked(c.memory_id, score))
    ranked.sort(key=lambda r: (-r.score, -r.memory_id))
    return ranked[:limit]
