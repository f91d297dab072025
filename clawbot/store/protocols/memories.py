"""The repository of the memories agents keep, and their search."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from clawbot.memory.records import Memory, MemoryHit, MemoryQuery

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Vectors = NDArray[np.float32]
    """Float32 rows of unit length, one per text: a dot product is the cosine similarity."""


class Embedder(Protocol):
    """Texts in, unit-length float32 vectors out, one row per text: what semantic recall
    needs of an embedding model (``clawbot.memory.embeddings`` has them; the one configured
    is given to :func:`clawbot.store.open_store`)."""

    @property
    def name(self) -> str:
        """Which model and size: stored with every vector, so a change re-embeds."""
        ...

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


class Memories(Protocol):
    """Texts agents keep under a namespaced key (see ``clawbot.memory``), with full-text
    search that ranks the asking session's and agent's memories first."""

    def use_embeddings(self, embedder: Embedder | None) -> None:
        """Rank searches by words and meaning with ``embedder`` (None: words alone)."""
        ...

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
        """Store a memory, replacing the text and tags of one under the same key (it keeps
        its creation time); what is stored now."""
        ...

    async def restore(self, memories: Sequence[Memory]) -> int:
        """Write memories exactly as given (times, session, agent), replacing any under the
        same keys, atomically; how many."""
        ...

    async def get(self, namespace: str, key: str) -> Memory | None: ...

    async def forget(self, namespace: str, key: str) -> bool:
        """Delete one memory; False when there was none."""
        ...

    async def search(self, query: MemoryQuery) -> builtins.list[MemoryHit]:
        """The best matches, best first. Any text is a safe query: its words are searched
        for, never parsed as search syntax; a text without words finds nothing. With
        semantic recall on, ranked by words and meaning (``clawbot.memory.ranking``)."""
        ...

    async def reindex(self) -> int | None:
        """Embed every memory again for semantic recall; how many, or None when it is off.
        An EmbeddingError when its model fails."""
        ...

    async def written_in(
        self, session_key: str, namespaces: Sequence[str] | None, limit: int
    ) -> builtins.list[Memory]:
        """The memories last written in one session (in these namespaces), newest first."""
        ...

    async def list(self, namespace: str | None = None) -> builtins.list[Memory]:
        """Every memory (of one namespace when given), by namespace and key."""
        ...

    async def count(self) -> int: ...
