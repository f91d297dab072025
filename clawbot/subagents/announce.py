"""The announce: when a child's turn ends (done, failed, timed out, stopped), its result is
reported to its parent, exactly once.

The report is built from what the store holds of the turn (its last answer, or its last
meaningful tool result; the files it wrote; its tokens, cost and duration) and injected into the
parent: persisted text only ``[@agent:<name>#<agent_id>] finish``, the payload in the
entry's meta, channel ``internal``, never delivered, lane ``announce``, through the parent's
backlog when it is busy (it never steers).

Exactly once: the store marks the child turn announced in the same transaction that writes
the announce into the parent (and refuses a second one). A crash before that transaction
leaves a finished, unannounced child turn, which :meth:`Announcer.recover` reports at the
next start; a crash after it leaves the parent's announce job, which the scheduler's own
recovery runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from clawbot.agents.registry import AgentRegistry
from clawbot.errors import MalformedMetaError, SubagentError
from clawbot.messages import INTERNAL_CHANNEL, Provenance, ToolResultBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.usage import cost_usd_of, tokens_of
from clawbot.scheduling.turns import DEADLINE_ERROR, STOPPED_WITH_PARENT
from clawbot.store import Store
from clawbot.subagents.exchanges import PeerExchanges
from clawbot.subagents.injection import Injector, TurnOrigin
from clawbot.subagents.records import (
    ANNOUNCE_META,
    ANNOUNCES_META,
    AnnouncePayload,
    AnnounceResult,
    AnnounceStats,
    AnnounceStatus,
    AnnounceTask,
    Artifact,
    ChildInfo,
    ChildRun,
    Injection,
    summarize,
)

log = logging.getLogger("clawbot.subagents")

WRITING_TOOLS = frozenset({"file_write", "file_edit"})
"""Tools whose ``path`` argument names a file the child wrote: an artifact."""


def announce_key(run: ChildRun) -> str:
    """Deterministic, from (parent, child, child run): the same report is stored once."""
    return f"announce:{run.parent_key}:{run.child_key}:{run.job_id}"


def status_of(run: ChildRun) -> AnnounceStatus:
    if run.status == "done":
        return "ok"
    if run.status == "cancelled":
        return "cancelled"
    if run.error and run.error.startswith(DEADLINE_ERROR):
        return "timeout"
    return "error"


def outcome_text(entries: Sequence[TranscriptEntry]) -> str:
    """The turn's last assistant answer, else its last tool result that is not an error."""
    for entry in reversed(entries):
        if entry.role == "assistant" and entry.text.strip():
            return entry.text
    for entry in reversed(entries):
        for block in reversed(entry.content):
            if isinstance(block, ToolResultBlock) and not block.is_error and block.content:
                return block.content
    return ""


def artifacts_of(entries: Sequence[TranscriptEntry]) -> tuple[Artifact, ...]:
    """The files the turn wrote (calls to the writing tools that did not fail)."""
    paths: dict[str, str] = {}
    failed: set[str] = set()
    for entry in entries:
        for call in entry.tool_calls:
            path = call.arguments.get("path")
            if call.name in WRITING_TOOLS and isinstance(path, str):
                paths[call.id] = path
        for block in entry.content:
            if isinstance(block, ToolResultBlock) and block.is_error:
                failed.add(block.tool_call_id)
    seen: dict[str, Artifact] = {}
    for call_id, path in paths.items():
        if call_id not in failed:
            seen.setdefault(path, Artifact(kind="file", path=path))
    return tuple(seen.values())


@dataclass(frozen=True)
class _Report:
    """One child turn's report, ready to inject into its parent: the payload, and the
    injection that carries it alone."""

    run: ChildRun
    payload: AnnouncePayload
    injection: Injection


class Announcer:
    """Reports child turns to their parents; bound to the scheduler as its ``TurnEnds``."""

    def __init__(
        self,
        *,
        store: Store,
        injector: Injector,
        agents: AgentRegistry,
        exchanges: PeerExchanges | None = None,
    ) -> None:
        self.store = store
        self.injector = injector
        self.agents = agents
        self.exchanges = exchanges if exchanges is not None else PeerExchanges()

    async def turn_ended(self, session: Session, job_id: str) -> None:
        """Report the turn that ended, or hold its report while a peer exchange it is part
        of goes on; release the reports of every exchange this turn left quiet."""
        run = await self.store.injections.child_run(job_id)
        due = not (run is None or run.announced or not run.finished or run.merged_into)
        exchanges = self.exchanges.of(session.key)
        if not exchanges:
            if due and run is not None:
                await self.announce(run)
            return
        if due and run is not None:
            self.exchanges.hold(exchanges[0], run)
        for trace_id in exchanges:
            if not any(
                self._busy(key, ending=session.key) for key in self.exchanges.sessions(trace_id)
            ):
                await self.announce_together(self.exchanges.close(trace_id))

    def _busy(self, key: str, *, ending: str) -> bool:
        """Whether session ``key`` has a turn running or waiting, beside the one ending in
        session ``ending``."""
        state = self.injector.scheduler.queue_state(key)
        running = state.active is not None and key != ending
        return running or bool(state.backlog or state.queued or state.waiting_lane)

    async def recover(self) -> None:
        runs = await self.store.injections.unannounced()
        if runs:
            log.info("announcing %d child turn(s) a crash left unreported", len(runs))
        for run in runs:
            try:
                await self.announce(run)
            except Exception:
                log.exception(
                    "could not announce child turn %s (retried at next start)", run.job_id
                )

    async def announce(self, run: ChildRun) -> None:
        """Build the report of one finished child turn and inject it into the parent. A
        turn stopped with its parent reports nothing: the person stopped them both, and a
        report would start the parent's turn again."""
        await self.announce_together([run])

    async def announce_together(self, runs: Sequence[ChildRun]) -> None:
        """Report finished child turns: one announce per parent, carrying the reports of
        all its children's turns among ``runs`` (a peer exchange's), in order."""
        by_parent: dict[str, list[_Report]] = {}
        for run in runs:
            report = await self._report(run)
            if report is not None:
                by_parent.setdefault(run.parent_key, []).append(report)
        for parent_key, reports in by_parent.items():
            injection = reports[0].injection if len(reports) == 1 else _batch(parent_key, reports)
            try:
                await self.injector.inject(injection)
            except SubagentError as exc:
                # Refused for good (past the hop limit): recorded, so no restart tries again.
                log.warning(
                    "announce of %s to %s dropped: %s", injection.source_key, parent_key, exc
                )
                for report in reports:
                    await self.store.injections.drop_announce(report.run.job_id)

    async def _report(self, run: ChildRun) -> _Report | None:
        """The report of one finished child turn; None (and recorded as reported) for a
        turn stopped with its parent, or a child session that is gone."""
        if run.status == "cancelled" and run.error == STOPPED_WITH_PARENT:
            await self.store.injections.drop_announce(run.job_id)
            return None
        child = await self.store.sessions.get(run.child_key)
        if child is None:
            log.warning(
                "child session %s is gone: turn %s not announced", run.child_key, run.job_id
            )
            await self.store.injections.drop_announce(run.job_id)
            return None
        entries = await self.store.injections.turn(child.key, run.job_id, small=True)
        origin = TurnOrigin.of(child, run.job_id, [e for e in entries if e.role == "user"])
        payload = self._payload(run, child, entries, origin)
        injection = Injection(
            kind="announce",
            target_key=run.parent_key,
            source_key=child.key,
            text=payload.text,
            provenance=Provenance(
                channel=INTERNAL_CHANNEL,
                sender_id=child.key,
                sender_name=payload.source_agent_name,
                message_id=payload.idempotency_key,
                source="internal",
            ),
            idempotency_key=payload.idempotency_key,
            hop=origin.hop,  # a report answers the message that started the turn
            trace=origin.trace.back(),
            meta_json=json.dumps({ANNOUNCE_META: payload.model_dump(mode="json")}),
            announces=(run.job_id,),
        )
        return _Report(run, payload, injection)

    def _payload(
        self,
        run: ChildRun,
        child: Session,
        entries: Sequence[TranscriptEntry],
        origin: TurnOrigin,
    ) -> AnnouncePayload:
        try:
            info = ChildInfo.of(child)
        except MalformedMetaError as exc:
            log.warning("%s", exc)
            info = None
        task = next((e.text for e in entries if e.role == "user"), "")
        status = status_of(run)
        summary = outcome_text(entries)
        if status != "ok":
            why = run.error or status
            summary = f"{why}. {summary}" if summary else why
        duration = None
        if run.started_at is not None and run.finished_at is not None:
            duration = int((run.finished_at - run.started_at).total_seconds() * 1000)
        spec = self.agents.find(child.agent_id)
        return AnnouncePayload(
            trace_id=origin.trace.trace_id,
            hop=origin.hop,
            idempotency_key=announce_key(run),
            source_agent_id=child.agent_id,
            source_agent_name=spec.name if spec is not None else child.agent_id,
            source_session_key=child.key,
            source_run_id=run.job_id,
            task=AnnounceTask(
                label=info.label if info is not None else summarize(task)[:60],
                prompt=summarize(task),
            ),
            result=AnnounceResult(
                status=status, summary=summarize(summary), artifacts=artifacts_of(entries)
            ),
            stats=AnnounceStats(
                duration_ms=duration,
                tokens=tokens_of(e.meta for e in entries),
                cost_usd=cost_usd_of(e.meta for e in entries),
                tool_uses=sum(len(entry.tool_calls) for entry in entries),
            ),
        )


def _batch(parent_key: str, reports: Sequence[_Report]) -> Injection:
    """One announce carrying several reports (a peer exchange's) to their parent: each
    report's line in the text, their payloads in order under ``subagent_announces``, the
    hop and trace of the farthest travelled, and every job it reports marked at once."""
    farthest = max(reports, key=lambda report: report.injection.hop).injection
    jobs = tuple(report.run.job_id for report in reports)
    digest = hashlib.sha256("\n".join(jobs).encode()).hexdigest()[:24]
    key = f"announce:{parent_key}:exchange:{digest}"
    return farthest.model_copy(
        update={
            "text": "\n".join(report.payload.text for report in reports),
            "provenance": farthest.provenance.model_copy(update={"message_id": key}),
            "idempotency_key": key,
            "meta_json": json.dumps(
                {ANNOUNCES_META: [report.payload.model_dump(mode="json") for report in reports]}
            ),
            "announces": jobs,
        }
    )
