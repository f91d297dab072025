"""Everything that must survive a restart. Core code asks for a :class:`Store` (of
``clawbot.store.interface``, its repositories' protocols in ``clawbot.store.protocols``)
and opens one with :func:`open_store`;
``SqliteStore`` (one SQLite file with an intake journal in front of it) and
``PostgresStore`` (``clawbot.store.postgres``, chosen by ``CLAWBOT_DATABASE_URL``) are its
two implementations, named outside the store by tests and benchmarks only.

Below every stage: it imports the foundation and the records each stage keeps below it
(``routing.sessions``, ``scheduling.jobs``, ``security.audit``, ``subagents.records``...),
never a stage's behaviour, ``app``, ``cli`` or ``adapters``. Semantic recall's embedding
model is given to :func:`open_store` from above, as the ``Embedder`` protocol of
``clawbot.store.protocols.memories``."""

from clawbot.store.backend import (
    LeaderLock,
    LeaderLocks,
    database_name,
    database_url,
    leader_locks,
    open_store,
    serves_alone,
)
from clawbot.store.copy import CopyReport, copy_database
from clawbot.store.ids import new_id
from clawbot.store.interface import Store
from clawbot.store.records import (
    DeferredContext,
    JobSummary,
    SessionActivity,
    StoredBacklogItem,
)
from clawbot.store.schema import SchemaStatus, migrate_url, schema_status
from clawbot.store.sqlite import SqliteStore

__all__ = [
    "CopyReport",
    "DeferredContext",
    "JobSummary",
    "LeaderLock",
    "LeaderLocks",
    "SchemaStatus",
    "SessionActivity",
    "SqliteStore",
    "Store",
    "StoredBacklogItem",
    "copy_database",
    "database_name",
    "database_url",
    "leader_locks",
    "migrate_url",
    "new_id",
    "open_store",
    "schema_status",
    "serves_alone",
]
