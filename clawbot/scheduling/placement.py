"""Where a session's turns run when several processes share one database (PostgreSQL).

Each session has one owner process at a time (``clawbot.store.protocols.owners``); only the
owner runs its turns, so a session never has two active turns across processes. A message
another process takes in is stored there as a backlog item, durable before its platform
hears "got it", and the owner is told over LISTEN/NOTIFY: it picks the item up and, as with
a message of its own, a person's message steers the running turn at its next tool boundary.
``/stop`` is passed on the same way. When a process dies its row expires and the next process
to look takes its sessions over, with the jobs, backlog and unsent replies it left (the
scheduler's periodic round looks; a message for such a session looks at once).

On SQLite (one process per home) nothing here runs: ``enabled`` is False."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from clawbot.lru import LRUCache
from clawbot.messages import INTERNAL_CHANNEL, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.transcripts import TranscriptCache
from clawbot.scheduling.adoption import Adopter
from clawbot.scheduling.backlog import BacklogItem
from clawbot.scheduling.jobs import TurnJob
from clawbot.scheduling.records import TurnHandle, TurnOutcome
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.store.records import OwnerNotice

log = logging.getLogger("clawbot.scheduler")

_REMEMBERED = 100_000
"""Job ids (and owned session keys) remembered: more than a process holds in memory."""


class Placement:
    """``stop`` is the scheduler's ``/stop`` for a session this process owns.

    A session's cached transcript is forgotten when this process takes the session over
    from another: that one may have run turns since it was cached (this process created
    it, or owned it before its own claim lapsed). A session moves to this process only so,
    and never away from it but by another's take-over."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        adopter: Adopter,
        stop: Callable[[str], Awaitable[object]],
        transcripts: TranscriptCache,
    ) -> None:
        self.settings = settings
        self.store = store
        self._transcripts = transcripts
        self.enabled = store.owners.shared
        self._adopter = adopter
        self._stop = stop
        self._mine: LRUCache[str, bool] = LRUCache(_REMEMBERED)
        self._listener: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None

    # whose session -----------------------------------------------------------------------

    async def owner_elsewhere(self, session_key: str) -> str | None:
        """The live process that runs this session's turns, or None when it is this one
        (made so when the session had no owner or a dead one, whose work is picked up
        first, so it runs before what arrives now)."""
        if not self.enabled or self._mine.get(session_key):
            return None
        claim = await self.store.owners.claim(session_key)
        if not claim.mine:
            return claim.owner
        self._mine.put(session_key, True)
        if claim.taken_from is not None:
            self._transcripts.forget(session_key)
            log.info(
                "session %s: took it over from %s, which stopped", session_key, claim.taken_from
            )
            await self._adopter.adopt([session_key])
        return None

    async def hand_over(
        self,
        owner: str,
        session: Session,
        job: TurnJob,
        entry: TranscriptEntry,
        write: Callable[[TurnJob, BacklogItem], Awaitable[bool]],
    ) -> TurnHandle | None:
        """Store a message for a session ``owner`` runs, as a backlog item there (durable
        before this returns), and tell ``owner``. The handle's outcome is ``deferred`` at
        once: the turn that answers it runs in the other process. None for a redelivery."""
        steers = job.lane == "main" and session.channel != INTERNAL_CHANNEL
        item = BacklogItem(
            kind="message",
            job_id=job.id,
            lane=job.lane,
            entry=entry,
            reply_to=job.reply_to,
            steers=steers,
        )
        if not await write(job, item):
            return None
        await self.store.owners.tell(owner, OwnerNotice(kind="work", session_key=session.key))
        future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        future.set_result(TurnOutcome(job_id=job.id, status="deferred", elsewhere=owner))
        return TurnHandle(job.id, session.key, job.lane, future)

    async def stop_elsewhere(self, session_key: str) -> bool:
        """Pass ``/stop`` on to the process that runs the session, if another one does."""
        owner = await self.owner_elsewhere(session_key)
        if owner is None:
            return False
        await self.store.owners.tell(owner, OwnerNotice(kind="stop", session_key=session_key))
        return True

    # life cycle ----------------------------------------------------------------------------

    async def round(self, *, startup: bool) -> None:
        """Say this process lives, take over the sessions of dead ones and pick up the work
        stored for owned sessions that this process does not hold yet (a notice lost, a
        session taken over, the work of an earlier process at start-up)."""
        # Renewed every round (a third of the lease at most): valid for two thirds of it, a
        # dead process's sessions are taken over within one lease of its last round.
        adoption = await self.store.owners.adopt(lease=self._lease(), startup=startup)
        if adoption.lapsed:
            self._lapsed()
        for key in adoption.taken:
            self._transcripts.forget(key)
        await self._adopter.adopt(None)

    def _lease(self) -> float:
        return self.settings.job_lease * 2 / 3

    def _lapsed(self) -> None:
        log.error(
            "this process did not renew its claim in time (was it paused?): other"
            " processes may have taken its sessions over; claiming each again"
        )
        self._mine = LRUCache(_REMEMBERED)

    def start(self) -> None:
        if self.enabled and self._listener is None:
            self._listener = asyncio.create_task(self.store.owners.listen(self._heard))
            # Renewed on a connection of its own, every sixth of the lease: a process busy
            # with turns (its store's connection queued) never looks dead to the others.
            self._keeper = asyncio.create_task(
                self.store.owners.keep_alive(
                    lease=self._lease(), every=self.settings.job_lease / 6, lapsed=self._lapsed
                )
            )

    async def stop(self) -> None:
        """Stop listening and hand this process's sessions to the others."""
        for task in (self._listener, self._keeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._listener = self._keeper = None
        if self.enabled:
            await self.store.owners.leave()

    async def _heard(self, notice: OwnerNotice) -> None:
        try:
            if notice.kind == "stop":
                await self._stop(notice.session_key)
            elif notice.session_key:
                await self._adopter.adopt([notice.session_key])
            else:
                await self._adopter.adopt(None)
        except Exception:
            log.exception("could not act on a notice for session %s", notice.session_key)
