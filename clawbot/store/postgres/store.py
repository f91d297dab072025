"""The store on PostgreSQL: the shared repositories (``clawbot.store.repositories``) over a
:class:`~clawbot.store.postgres.database.PostgresDatabase`. No intake journal: each accepted
message is committed before the platform is told, and the commit is the durability point."""

from __future__ import annotations

from clawbot.errors import StoreError
from clawbot.store.postgres.database import PostgresDatabase
from clawbot.store.postgres.migrate import migrate, schema_version
from clawbot.store.postgres.owners import PostgresOwners
from clawbot.store.postgres.search import tsvector_search
from clawbot.store.postgres.sessions import PostgresSessions
from clawbot.store.postgres.transcripts import PostgresTranscripts
from clawbot.store.postgres.turns import PostgresJobs
from clawbot.store.postgres.vectors import PgVectors, VectorSupport, support
from clawbot.store.repositories import Repositories


class PostgresStore(Repositories):
    """The PostgreSQL implementation of :class:`clawbot.store.Store`. Open with
    :meth:`open`, close with :meth:`close`."""

    def __init__(self, database: PostgresDatabase, vectors: VectorSupport) -> None:
        self.database = database
        self.vectors = vectors
        """Whether semantic recall searches with pgvector (else in each process)."""
        lookup = PgVectors if vectors.version is not None else None
        super().__init__(database, intakes=None, search=tsvector_search, lookup=lookup)
        self.jobs = PostgresJobs(database, owner=self.owner)
        """The shared jobs repository, a message's intake and a turn's end one round trip
        each (``clawbot.store.postgres.turns``)."""
        self.sessions = PostgresSessions(database)
        """The shared sessions repository, a chat's session opened in one round trip."""
        self.transcripts = PostgresTranscripts(database)
        self.owners = PostgresOwners(database, self.owner)

    @classmethod
    async def open(cls, url: str, *, migrating: bool = True) -> PostgresStore:
        """Connect and (``migrating``) bring the schema up to date; a clear StoreError when
        the server cannot be reached or was written by a newer clawbot."""
        database = await PostgresDatabase.open(url)
        try:
            if migrating:
                where = database.where
                await database.run(lambda conn: migrate(conn, where))
            vectors = await database.run(support)
        except BaseException:
            await database.close()
            raise
        return cls(database, vectors)

    async def close(self) -> None:
        await self.database.close()

    async def flush(self) -> None:
        """Nothing waits in front of PostgreSQL: every commit is visible already."""
        return None

    async def check_writable(self) -> None:
        """Raise a clear StoreError now if this connection may not write (a read-only
        replica, a user without the rights): a write that changes nothing, rolled back."""
        read_only = await self.database.fetchone("SHOW transaction_read_only")
        if read_only is not None and read_only[0] == "on":
            raise StoreError(
                f"the PostgreSQL database {self.database.where} is read-only",
                hint="point CLAWBOT_DATABASE_URL at the primary server",
            )
        await self.database.write("UPDATE memory_vectors_version SET n = n WHERE 1 = 0", ())

    async def check_intact(self) -> None:
        """PostgreSQL keeps its own files whole; reaching the schema is the check here."""
        await self.schema_version()

    async def schema_version(self) -> int:
        return await self.database.run(schema_version)

    def note_replied(self, job_id: str) -> None:
        """Nothing to note ahead: the reply's mark is committed like everything else."""
        return None

    async def recover_intakes(self) -> int:
        """No intake journal on PostgreSQL: nothing is ever waiting outside the database."""
        return 0
