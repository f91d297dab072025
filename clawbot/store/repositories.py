"""The repositories of :class:`clawbot.store.Store` over one database, whichever backend it
is: both stores (``SqliteStore``, ``PostgresStore``) are this, with their own database, their
own full-text search for memories and, on SQLite only, the intake journal."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from clawbot.store.access import SqlAccess, SqlPairing
from clawbot.store.agents import SqlAgents
from clawbot.store.approvals import SqlApprovals
from clawbot.store.audit import SqlAuditLog
from clawbot.store.backlog import SqlBacklog
from clawbot.store.console import SqlConsole
from clawbot.store.injections import SqlInjections
from clawbot.store.jobs import SqlJobs
from clawbot.store.ledger import SqlLedger
from clawbot.store.memories import SqlMemories, TextSearch
from clawbot.store.memory_vectors import VectorLookup
from clawbot.store.owners import SingleOwner
from clawbot.store.protocols.owners import SessionOwners
from clawbot.store.schedules import SqlSchedules
from clawbot.store.sessions import SqlSessions, SqlTranscripts
from clawbot.store.sql import SqlDatabase
from clawbot.store.usage import SqlUsage

if TYPE_CHECKING:
    from clawbot.store.intake import PendingIntakes


class Repositories:
    """One small repository per family of tables, and who holds this process's leases."""

    def __init__(
        self,
        database: SqlDatabase,
        *,
        intakes: PendingIntakes | None,
        search: TextSearch,
        lookup: Callable[[], VectorLookup] | None = None,
    ) -> None:
        # Who holds the leases of the jobs this process runs: host, pid and a per-open tag.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.sessions = SqlSessions(database)
        self.transcripts = SqlTranscripts(database)
        self.jobs = SqlJobs(database, intakes, owner=self.owner)
        self.backlog = SqlBacklog(database)
        self.ledger = SqlLedger(database)
        self.access = SqlAccess(database)
        self.pairing = SqlPairing(database)
        self.agents = SqlAgents(database)
        self.injections = SqlInjections(database)
        self.memories = SqlMemories(database, search, lookup)
        self.audit = SqlAuditLog(database)
        self.approvals = SqlApprovals(database)
        self.console = SqlConsole(database)
        self.schedules = SqlSchedules(database)
        self.usage = SqlUsage(database)
        self.owners: SessionOwners = SingleOwner(self.owner)
