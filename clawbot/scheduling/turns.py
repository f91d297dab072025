"""Running one planned turn as a task: start (or claim) its job, run the model under the
turn deadline with a typing indicator, send the reply, and record how it ended: done,
yielded at a tool boundary (its resume token joins the backlog), cancelled by ``/stop`` or
shutdown, over the deadline, or failed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from clawbot.channels.live_reply import LiveReply
from clawbot.clock import human_duration
from clawbot.errors import LeaseLostError, MalformedMetaError, ShuttingDownError, StoreError
from clawbot.lru import LRUCache
from clawbot.messages import TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.control import TurnResult
from clawbot.runtime.metering import calls_as
from clawbot.runtime.turn import Runtime
from clawbot.scheduling.backlog import BacklogItem, asked_in, resume_token
from clawbot.scheduling.delivery import Replies, ReplyMarks
from clawbot.scheduling.hooks import TurnEnds
from clawbot.scheduling.jobs import QUIET_REPLY
from clawbot.scheduling.notices import asked_of, deadline_notice, failure_notice
from clawbot.scheduling.records import TurnOutcome
from clawbot.scheduling.session_state import Run, SessionQueue
from clawbot.scheduling.streaming import StreamingTurns
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.subagents.records import ChildInfo

log = logging.getLogger("clawbot.scheduler")
DEADLINE_ERROR = "turn deadline of "
STOPPED = "stopped by /stop"
STOPPED_WITH_PARENT = "stopped with its parent"
"""A subagent's turn ended because its parent's was stopped: nothing to report back."""
"""How the error of a job stopped at its deadline (or a child's run timeout) begins."""


class TurnRunner:
    """Runs turns. ``loop`` is the scheduler's cached event loop; ``resolve`` answers a
    job's handles with its outcome; ``finish`` frees the session and slot of an ended
    turn; ``record_context`` writes context messages held back while it ran."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        runtime: Runtime,
        replies: Replies,
        marks: ReplyMarks,
        loop: Callable[[], asyncio.AbstractEventLoop],
        resolve: Callable[[str, TurnOutcome], None],
        finish: Callable[[Run], None],
        record_context: Callable[[SessionQueue], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.store = store
        self.runtime = runtime
        self.replies = replies
        self.marks = marks
        self._loop = loop
        self._resolve = resolve
        self._finish = finish
        self._record_context = record_context
        self._tasks: set[asyncio.Task[None]] = set()
        self._unclosed: list[list[str]] = []  # failed jobs the store could not close yet
        self._refusals_told: LRUCache[tuple[str, str], bool] = LRUCache(10_000)
        """(session, budget) pairs whose refusal a chat was shown (see _told_before)."""
        streaming = runtime.plugins.named("streaming")
        self._streaming = streaming if isinstance(streaming, StreamingTurns) else None
        """Streams a turn's text to its live reply (when the bot was assembled with it)."""
        self.ends: TurnEnds | None = None
        """Told when a child session's turn ended (bound by the subagents package)."""

    def launch(self, run: Run) -> None:
        task = self._loop().create_task(self._execute(run), name=f"turn {run.job.id}")
        run.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def tasks(self) -> set[asyncio.Task[None]]:
        """The turns running now (a copy)."""
        return set(self._tasks)

    async def release_on_shutdown(self, run: Run) -> None:
        """Leave the job queued, without owner or lease: the next start resumes it."""
        with contextlib.suppress(LeaseLostError):
            await self.store.jobs.requeue(run.queue.session, run.job.id)

    async def close_unclosed(self) -> None:
        """Record the failed jobs the store refused before, now that it may take them."""
        while self._unclosed:
            await self.store.jobs.close(self._unclosed[0], "failed", "internal error")
            del self._unclosed[0]

    async def _execute(self, run: Run) -> None:
        queue = run.queue
        outcome: TurnOutcome | None = None
        try:
            try:
                outcome = await self._turn(run)
            except asyncio.CancelledError:
                if run.cancel_reason is None:
                    raise  # not ours to record (the event loop is going away): like a crash
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                outcome = await self._cancelled(run)
            except LeaseLostError as exc:
                log.warning("session %s: %s", queue.key, exc)
                outcome = TurnOutcome(job_id=run.job.id, status="deferred")
            except StoreError as exc:
                log.error("session %s: turn %s could not be stored: %s", queue.key, run.job.id, exc)
                outcome = await self._failed(run, str(exc))
            except Exception:
                log.exception("session %s: turn %s crashed", queue.key, run.job.id)
                outcome = await self._failed(run)
            if queue.context:
                try:
                    await self._record_context(queue)
                except Exception:
                    log.exception("session %s: could not record context messages", queue.key)
            if outcome is not None and outcome.status != "deferred":
                await self._ended(run)
        finally:
            if outcome is not None:
                self._resolve(run.job.id, outcome)
            self._finish(run)

    async def _turn(self, run: Run) -> TurnOutcome | None:
        if run.cancel_reason is not None:
            raise asyncio.CancelledError
        run.began = True  # in the same step as the check: a stop from now on cancels the task
        session = run.queue.session
        job = run.job
        if run.mode != "started" and not self.runtime.client.loaded():
            # A start or a take-over counts an attempt: not while the process cannot work
            # on the turn yet (a kill then is no fault of the job's).
            await self.runtime.client.load()
        if run.mode == "start":
            transcript = await self.runtime.transcripts.get(session)
            replied = self.marks.take()
            try:
                await self.store.jobs.start(
                    session,
                    job.id,
                    lease_until=run.lease_until,
                    entries=run.entries,
                    carried=run.carried,
                    replied=replied,
                )
            except BaseException:
                self.marks.give_back(replied)
                raise
            transcript.append(run.entries)
        elif run.mode == "claim":
            if not await self.store.jobs.claim(job, run.lease_until):
                return TurnOutcome(job_id=job.id, status="deferred")
            log.info("session %s: resuming job %s after a crash", session.key, job.id)
        inputs = await self._inputs(run)
        # a cron turn may end quiet (QUIET_REPLY): no preview of it is shown
        streams = self._streaming is not None and job.lane != "cron"
        live = self.replies.live(session, job) if streams else None
        try:
            # a scheduled task's or a heartbeat's calls are counted as "scheduled"
            with calls_as("scheduled", session) if job.lane == "cron" else contextlib.nullcontext():
                result = await self._run(run, inputs, live)
        except BaseException:
            await _stopped(live)  # /stop, the deadline, a crash: the preview says so
            raise
        if result.status == "yielded":
            await _stopped(live)
            await self._yielded(run, result, inputs)
            return None
        if result.status == "done" and job.lane == "cron" and result.reply.strip() == QUIET_REPLY:
            self.marks.mark(job.id)  # nothing needs attention: nothing is sent
            return TurnOutcome(job_id=job.id, status="done", reply=result.reply, result=result)
        if self._told_before(session, job.lane, result):
            await _stopped(live)
            self.marks.mark(job.id)
            log.info(
                "session %s: turn %s refused by a spent budget, told before", session.key, job.id
            )
            return TurnOutcome(job_id=job.id, status="failed", reply=result.reply, result=result)
        if live is not None and result.status == "done":
            delivery = await self.replies.finish(live, result.reply)
        else:
            await _stopped(live)
            delivery = await self.replies.send(session, result.reply, run.job, kind="reply")
        if delivery.status == "failed":
            await self.store.jobs.mark_delivery_failed(job.id, delivery.error or "unknown")
        self.marks.mark(job.id)
        if delivery.status == "sent" and result.refused_by is not None:
            self._refusals_told.put((session.key, result.refused_by), True)
        if delivery.status == "sent" and result.status == "done":
            await self._reply_sent(run, result.reply)
        return TurnOutcome(
            job_id=job.id,
            status="done" if result.status == "done" else "failed",
            reply=result.reply,
            delivery=delivery,
            result=result,
        )

    def _told_before(self, session: Session, lane: str, result: TurnResult) -> bool:
        """A turn no person asked for (a subagent's report, a schedule) that a spent budget
        refused, in a chat shown that budget's refusal already: it would only say the same
        again, once for each report or each run of a schedule until the budget is raised."""
        return (
            lane != "main"
            and result.refused_by is not None
            and self._refusals_told.get((session.key, result.refused_by)) is not None
        )

    async def _reply_sent(self, run: Run, reply: str) -> None:
        """The plugins hear the reply went out (a voice note follows it). The turn ended
        with its reply, so a /stop or a shutdown meanwhile only cuts what follows short."""
        try:
            await self.runtime.plugins.reply_sent(run.queue.session, reply)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if run.cancel_reason is None or task is None:
                raise
            task.uncancel()
            log.info("session %s: what follows the reply was stopped", run.queue.key)

    async def _run(
        self, run: Run, inputs: Sequence[TranscriptEntry], live: LiveReply | None
    ) -> TurnResult:
        """The turn under its deadline, with a typing indicator until its first text shows
        (the whole turn without a live reply), its model text streamed to ``live``."""
        session, job = run.queue.session, run.job
        loop = self._loop()
        deadline = loop.call_at(loop.time() + self._deadline(session), self._expire, run)
        try:
            with contextlib.ExitStack() as streaming:
                if live is not None and self._streaming is not None:
                    streaming.enter_context(self._streaming.showing(job.id, live))
                if self.replies.shows_typing(session):
                    async with self.replies.typing(session, live.visible if live else None):
                        return await self.runtime.run_turn(
                            session, job.id, control=run, inputs=inputs
                        )
                return await self.runtime.run_turn(session, job.id, control=run, inputs=inputs)
        finally:
            deadline.cancel()

    async def _inputs(self, run: Run) -> Sequence[TranscriptEntry]:
        """The messages this turn answers, for what their meta carries (an announce's
        payload, an injection's hop and trace). A person's message stored before its turn
        carries none, so only injected and recovered turns read theirs back."""
        if run.entries:
            return run.entries
        if run.mode == "claim" or run.job.lane != "main":
            entries = await self.store.injections.turn(run.queue.key, run.job.id)
            return [entry for entry in entries if entry.role == "user"]
        return ()

    def _deadline(self, session: Session) -> float:
        """A child's own run timeout (set when it was spawned), else the turn deadline."""
        if session.owner_key is not None:
            try:
                child = ChildInfo.of(session)
            except MalformedMetaError as exc:
                log.warning("session %s: %s", session.key, exc)
                child = None
            if child is not None:
                return child.timeout
        return self.settings.turn_deadline

    async def _ended(self, run: Run) -> None:
        """A child's turn ended: its announce goes to its parent. A failure here is logged;
        the next start announces what was not."""
        session = run.queue.session
        if self.ends is None or session.owner_key is None:
            return
        try:
            await self.ends.turn_ended(session, run.job.id)
        except ShuttingDownError:
            log.info("session %s: turn %s is reported at the next start", session.key, run.job.id)
        except Exception:
            log.exception("session %s: could not report turn %s", session.key, run.job.id)

    async def _yielded(
        self, run: Run, result: TurnResult, inputs: Sequence[TranscriptEntry]
    ) -> None:
        queue = run.queue
        steer = queue.steering
        task = run.task_text
        if task is None:
            transcript = await self.runtime.transcripts.get(queue.session)
            task = transcript.user_text(run.job.id)
        entries = run.entries or inputs
        token = resume_token(
            task,
            result.entries,
            earlier=run.steps,
            reason="steer" if steer else "shutdown",
            asked=asked_in(entries) if entries else [task],
        )
        item = BacklogItem(
            kind="resume",
            job_id=run.job.id,
            lane=run.job.lane,
            resume=token,
            reply_to=run.job.reply_to,
        )
        await self.store.jobs.requeue(queue.session, run.job.id, item)
        queue.backlog.append(item)
        queue.steered = steer
        log.info(
            "session %s: turn %s stopped at a tool boundary (%s); its task waits in the backlog",
            queue.key,
            run.job.id,
            "a newer message" if steer else "shutdown",
        )

    def _expire(self, run: Run) -> None:
        """The turn deadline passed: cancel the turn, unless it is already being stopped.
        (A timer and a cancel reason rather than ``asyncio.timeout``: that costs a turn 7 µs
        against 3, with three loop lookups that each make a system call.)"""
        if run.cancel_reason is None and run.task is not None:
            run.cancel_reason = "deadline"
            run.task.cancel()

    async def _cancelled(self, run: Run) -> TurnOutcome:
        if run.cancel_reason == "deadline":
            return await self._over_deadline(run)
        self.runtime.transcripts.forget(run.queue.key)
        if run.cancel_reason == "shutdown":
            await self.release_on_shutdown(run)
            return TurnOutcome(job_id=run.job.id, status="deferred")
        error = STOPPED_WITH_PARENT if run.cancel_reason == "with-parent" else STOPPED
        await self.store.jobs.close([run.job.id, *run.carried], "cancelled", error)
        log.info("session %s: turn %s %s", run.queue.key, run.job.id, error)
        return TurnOutcome(job_id=run.job.id, status="cancelled")

    async def _over_deadline(self, run: Run) -> TurnOutcome:
        self.runtime.transcripts.forget(run.queue.key)
        limit = human_duration(self._deadline(run.queue.session))
        log.warning("session %s: turn %s passed its %s deadline", run.queue.key, run.job.id, limit)
        text = deadline_notice(await self._asked(run), limit)
        await self.store.jobs.close(
            [run.job.id, *run.carried],
            "failed",
            f"{DEADLINE_ERROR}{limit} exceeded",
            notice_of=run.job.id,
        )
        delivery = await self.replies.send(run.queue.session, text, run.job, kind="error")
        self.marks.mark(run.job.id)
        return TurnOutcome(job_id=run.job.id, status="failed", reply=text, delivery=delivery)

    async def _failed(self, run: Run, reason: str | None = None) -> TurnOutcome:
        self.runtime.transcripts.forget(run.queue.key)
        text = failure_notice(await self._asked(run), reason)
        jobs = [run.job.id, *run.carried]
        try:
            await self.store.jobs.close(jobs, "failed", "internal error", notice_of=run.job.id)
        except StoreError as exc:
            # The user hears of the failure either way; the housekeeping closes the jobs
            # once the store can be written, so they are not run again behind their back.
            log.error(
                "session %s: could not record turn %s as failed: %s", run.queue.key, run.job.id, exc
            )
            self._unclosed.append(jobs)
        delivery = await self.replies.send(run.queue.session, text, run.job, kind="error")
        self.marks.mark(run.job.id)
        return TurnOutcome(job_id=run.job.id, status="failed", reply=text, delivery=delivery)

    async def _asked(self, run: Run) -> list[str]:
        """What a failure notice for the turn quotes: the people's messages it answers (read
        back when its input was stored before the turn; none when that read fails too)."""
        if run.entries:
            return asked_in(run.entries)
        try:
            return await asked_of(self.store, run.queue.key, run.job.id)
        except Exception as exc:
            log.error(
                "session %s: could not read what turn %s answers: %s",
                run.queue.key,
                run.job.id,
                exc,
            )
            return []


async def _stopped(live: LiveReply | None) -> None:
    """Mark what a live reply showed as stopped; never fails the turn's ending."""
    if live is None:
        return
    try:
        await live.stop()
    except Exception:
        log.exception("could not mark a stopped reply in %s", live.template.session_key)
