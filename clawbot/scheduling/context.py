"""Messages that start no turn (group chatter kept as context), written into the transcript
in order with the session's turns: at once when no turn runs, else held back (durably)
until the running turn ends."""

from __future__ import annotations

from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.transcripts import TranscriptCache
from clawbot.scheduling.queues import SessionQueues
from clawbot.scheduling.session_state import SessionQueue
from clawbot.store import Store


class ContextMessages:
    def __init__(
        self, *, store: Store, transcripts: TranscriptCache, queues: SessionQueues
    ) -> None:
        self.store = store
        self.transcripts = transcripts
        self.queues = queues

    async def add(
        self, session: Session, entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> bool:
        """Store a context message; False for a redelivered one."""
        queue = self.queues.queue(session)
        queue.submitting += 1
        try:
            try:
                stored = await self._store(queue, entry, dedup_id)
            finally:
                queue.submitting -= 1
            if queue.run is None and queue.context:
                await self.record(queue)
        finally:
            # also when cut short (cancelled): a message stored meanwhile waits for this
            self.queues.settle(queue)
        return stored

    async def _store(
        self, queue: SessionQueue, entry: TranscriptEntry, dedup_id: str | None
    ) -> bool:
        session = queue.session
        if queue.run is None and not queue.context:
            transcript = await self.transcripts.get(session)
            stored = await self.store.transcripts.append_context(session, entry, dedup_id=dedup_id)
            if stored:
                transcript.append([entry])
            return stored
        row = await self.store.backlog.defer_context(session, entry, dedup_id=dedup_id)
        if row is not None:
            queue.context.append((row, entry))
        return row is not None

    async def record(self, queue: SessionQueue) -> None:
        """Write held-back context messages into the transcript (after the turn they
        arrived during, before the next one)."""
        if queue.recording:
            return
        queue.recording = True
        try:
            while queue.context:
                batch = list(queue.context)
                transcript = await self.transcripts.get(queue.session)
                await self.store.backlog.record_context(
                    queue.session, [row for row, _ in batch], [entry for _, entry in batch]
                )
                del queue.context[: len(batch)]
                transcript.append(entry for _, entry in batch)
        finally:
            queue.recording = False
