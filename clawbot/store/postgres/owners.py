"""Session owners on PostgreSQL, for several processes on one database.

Each process has a row in ``clawbot_processes`` that it renews while it lives
(``alive_until``, the database's clock, so machines need not agree on the time). A session
has one owner in ``session_owners``: the process that first took a message for it, until that
process's row expires; then the next process to look takes it over, with the work the dead
one left in it. Claims and take-overs run in one transaction with the owner's row locked, so
two processes never both own a session. Processes tell each other about a session through
LISTEN/NOTIFY on one channel, the addressee named in the payload; a notice is sent when its
transaction commits, and one lost with a connection is made up for by a look at every owned
session (the empty key) and by the scheduler's periodic round."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import psycopg

from clawbot.store.postgres.database import PostgresDatabase
from clawbot.store.records import Adoption, OwnerClaim, OwnerNotice

log = logging.getLogger("clawbot.store")

CHANNEL = "clawbot_sessions"
"""The LISTEN/NOTIFY channel every process listens on."""

_ALIVE = "SELECT 1 FROM clawbot_processes p WHERE p.owner = %s AND p.alive_until > now()"
_RECONNECT = (0.2, 0.5, 1.0, 2.0, 5.0)
_NEW_OR_OWNER = (
    "WITH inserted AS (INSERT INTO session_owners (session_key, owner) VALUES (?, ?)"
    " ON CONFLICT (session_key) DO NOTHING RETURNING owner)"
    " SELECT owner FROM inserted UNION ALL SELECT owner FROM session_owners WHERE session_key = ?"
)
"""A session's owner once this process inserted itself as the owner of a session that had
none: itself, the owner the row already had, or nothing (another process inserted it while
this statement ran)."""


class PostgresOwners:
    """The owners' tables seen from the process ``owner`` (``host:pid:tag``)."""

    def __init__(self, database: PostgresDatabase, owner: str) -> None:
        self._database = database
        self._owner = owner

    @property
    def shared(self) -> bool:
        return True

    async def claim(self, session_key: str) -> OwnerClaim:
        me = self._owner
        # The common cases first, in one round trip: a session nobody owns yet (inserted
        # now, mine) or one this process owns. Anything else (another process's, or one
        # inserted by another process while this statement ran) is looked at with its row
        # locked, below.
        found = await self._database.fetchone(_NEW_OR_OWNER, (session_key, me, session_key))
        if found is not None and found[0] == me:
            return OwnerClaim(owner=me, mine=True)

        def claim(conn: psycopg.Connection[Any]) -> OwnerClaim:
            with conn.transaction():
                row = conn.execute(
                    "SELECT owner FROM session_owners WHERE session_key = %s FOR UPDATE",
                    (session_key,),
                ).fetchone()
                if row is None:
                    inserted = conn.execute(
                        "INSERT INTO session_owners (session_key, owner) VALUES (%s, %s)"
                        " ON CONFLICT (session_key) DO NOTHING RETURNING owner",
                        (session_key, me),
                    ).fetchone()
                    if inserted is not None:
                        return OwnerClaim(owner=me, mine=True)
                    row = conn.execute(  # another process inserted it this very moment
                        "SELECT owner FROM session_owners WHERE session_key = %s FOR UPDATE",
                        (session_key,),
                    ).fetchone()
                    assert row is not None  # inserted and not deleted: owners are never deleted
                (current,) = row
                if current == me:
                    return OwnerClaim(owner=me, mine=True)
                if conn.execute(_ALIVE, (current,)).fetchone() is not None:
                    return OwnerClaim(owner=current, mine=False)
                conn.execute(
                    "UPDATE session_owners SET owner = %s, claimed_at = now()"
                    " WHERE session_key = %s",
                    (me, session_key),
                )
                return OwnerClaim(owner=me, mine=True, taken_from=current)

        return await self._database.run(claim)

    async def owned(self, session_keys: Collection[str]) -> set[str]:
        if not session_keys:
            return set()
        rows = await self._database.run(
            lambda conn: conn.execute(
                "SELECT session_key FROM session_owners WHERE owner = %s AND session_key = ANY(%s)",
                (self._owner, list(session_keys)),
            ).fetchall()
        )
        return {key for (key,) in rows}

    async def adopt(self, *, lease: float, startup: bool = False) -> Adoption:
        me = self._owner

        def adopt(conn: psycopg.Connection[Any]) -> Adoption:
            with conn.transaction():
                lapsed = conn.execute(_ALIVE, (me,)).fetchone() is None and not startup
                conn.execute(
                    "INSERT INTO clawbot_processes (owner, alive_until)"
                    " VALUES (%s, now() + make_interval(secs => %s))"
                    " ON CONFLICT (owner) DO UPDATE SET alive_until = EXCLUDED.alive_until",
                    (me, lease),
                )
                _expire_dead_neighbours(conn, me)
                dead = [
                    owner
                    for (owner,) in conn.execute(
                        "SELECT owner FROM clawbot_processes WHERE alive_until <= now()"
                        " FOR UPDATE SKIP LOCKED"
                    ).fetchall()
                ]
                taken: set[str] = set()
                if dead:
                    taken.update(
                        key
                        for (key,) in conn.execute(
                            "UPDATE session_owners SET owner = %s, claimed_at = now()"
                            " WHERE owner = ANY(%s) RETURNING session_key",
                            (me, dead),
                        ).fetchall()
                    )
                    conn.execute("DELETE FROM clawbot_processes WHERE owner = ANY(%s)", (dead,))
                if startup:
                    taken.update(_adopt_unowned(conn, me))
                return Adoption(taken=frozenset(taken), lapsed=lapsed)

        adoption = await self._database.run(adopt)
        if adoption.taken:
            log.info("took over %d session(s) from processes that stopped", len(adoption.taken))
        return adoption

    async def keep_alive(self, *, lease: float, every: float, lapsed: Callable[[], None]) -> None:
        async def renew(conn: psycopg.AsyncConnection[Any], _reconnected: bool) -> None:
            while True:
                renewed = await conn.execute(
                    "UPDATE clawbot_processes"
                    " SET alive_until = now() + make_interval(secs => %s)"
                    " WHERE owner = %s AND alive_until > now()",
                    (lease, self._owner),
                )
                if renewed.rowcount == 0:
                    lapsed()  # expired or taken over: the next round claims afresh
                await asyncio.sleep(every)

        await self._on_own_connection("renewing this process's claim", renew)

    async def tell(self, owner: str, notice: OwnerNotice) -> None:
        payload = f"{owner}\t{notice.kind}\t{notice.session_key}"
        await self._database.run(
            lambda conn: conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
        )

    async def listen(self, heard: Callable[[OwnerNotice], Awaitable[None]]) -> None:
        async def hear(conn: psycopg.AsyncConnection[Any], reconnected: bool) -> None:
            await conn.execute(f"LISTEN {CHANNEL}")
            if reconnected:
                await heard(OwnerNotice(kind="work", session_key=""))  # what was missed
            async for notify in conn.notifies():
                owner, _, rest = notify.payload.partition("\t")
                kind, _, key = rest.partition("\t")
                if owner == self._owner:
                    await heard(OwnerNotice(kind=kind, session_key=key))

        await self._on_own_connection("listening for other processes' notices", hear)

    async def _on_own_connection(
        self,
        purpose: str,
        work: Callable[[psycopg.AsyncConnection[Any], bool], Awaitable[None]],
    ) -> None:
        """Run ``work`` on a connection of its own, never queued behind the store's, until
        cancelled: connected again (with growing pauses) whenever it is lost. ``work`` is
        told whether this is a new connection after a lost one."""
        failures = 0
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._database.url, autocommit=True, connect_timeout=10
                )
            except psycopg.Error as exc:
                delay = _RECONNECT[min(failures, len(_RECONNECT) - 1)]
                failures += 1
                log.warning(
                    "cannot connect for %s (%s); again in %.1f s",
                    purpose,
                    type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            try:
                await work(conn, failures > 0)
            except psycopg.Error as exc:
                failures += 1
                log.warning("lost the connection %s (%s)", purpose, type(exc).__name__)
            else:
                failures = 0
            finally:
                await conn.close()

    async def leave(self) -> None:
        await self._database.run(
            lambda conn: conn.execute(
                "UPDATE clawbot_processes SET alive_until = now() - interval '1 second'"
                " WHERE owner = %s",
                (self._owner,),
            )
        )


def _expire_dead_neighbours(conn: psycopg.Connection[Any], me: str) -> None:
    """A process of this machine whose pid is gone is dead now, not when its row expires:
    a restart after a crash takes its sessions over at once."""
    host = me.partition(":")[0]
    rows = conn.execute(
        "SELECT owner FROM clawbot_processes WHERE owner LIKE %s AND owner <> %s"
        " AND alive_until > now()",
        (host.replace("%", r"\%").replace("_", r"\_") + ":%", me),
    ).fetchall()
    gone = [owner for (owner,) in rows if not _pid_alive(owner)]
    if gone:
        conn.execute(
            "UPDATE clawbot_processes SET alive_until = now() - interval '1 second'"
            " WHERE owner = ANY(%s)",
            (gone,),
        )


def _pid_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _adopt_unowned(conn: psycopg.Connection[Any], me: str) -> set[str]:
    """Sessions with open work and no owner (a database copied from SQLite) become mine."""
    rows = conn.execute(
        "INSERT INTO session_owners (session_key, owner)"
        " SELECT DISTINCT session_key, %s FROM ("
        "   SELECT session_key FROM turn_jobs WHERE status IN ('queued', 'running')"
        "   UNION SELECT session_key FROM backlog"
        " ) AS open_work"
        " ON CONFLICT (session_key) DO NOTHING RETURNING session_key",
        (me,),
    ).fetchall()
    return {key for (key,) in rows}
