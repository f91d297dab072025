"""Everything that must survive a restart. Core code asks for a :class:`Store` (the
protocols of ``clawbot.store.interface``); ``SqliteStore`` is the one implementation, on
one SQLite file with an intake journal in front of it."""

from clawbot.store.ids import new_id
from clawbot.store.interface import Store
from clawbot.store.records import (
    DeferredContext,
    JobSummary,
    SessionActivity,
    StoredBacklogItem,
)
from clawbot.store.sqlite import SqliteStore

__all__ = [
    "DeferredContext",
    "JobSummary",
    "SessionActivity",
    "SqliteStore",
    "Store",
    "StoredBacklogItem",
    "new_id",
]
