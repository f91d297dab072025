"""Which store a configuration opens, set up as the bot uses it. The one place outside the
store's own modules that names a backend: callers hold a :class:`Store`, and a second
backend (PostgreSQL) is chosen here without a change anywhere else."""

from __future__ import annotations

from clawbot.settings import Settings
from clawbot.store.interface import Store
from clawbot.store.protocols.memories import Embedder
from clawbot.store.sqlite import SqliteStore


async def open_store(settings: Settings, embedder: Embedder | None = None) -> Store:
    """Open (creating and migrating if needed) the store the settings name, with semantic
    recall's embedding model when one is given (``clawbot.memory.embeddings``'
    ``configured_embedder``; nothing loads until its first use); the store's clear
    StoreError when it cannot open."""
    store = await SqliteStore.open(settings.db_path, synchronous=settings.db_synchronous)
    store.memories.use_embeddings(embedder)
    return store
