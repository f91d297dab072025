"""``/queue`` and ``/stop``: see and control a conversation's scheduling from the chat.
``/stop`` stops the conversation's subagents' turns too (children, grandchildren...)."""

from __future__ import annotations

from typing import Protocol

from clawbot.clock import human_duration
from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.scheduling.backlog import shorten
from clawbot.scheduling.records import QueueState, StopReport
from clawbot.store.protocols.conversations import Sessions
from clawbot.subagents.tree import stop_family


class QueueControl(Protocol):
    """What the queue commands ask of the scheduler: one session's queue, and stopping it."""

    def queue_state(self, session_key: str) -> QueueState: ...

    async def stop(self, session_key: str, *, with_parent: bool = False) -> StopReport: ...


def register_queue_commands(
    registry: CommandRegistry, queue: QueueControl, sessions: Sessions
) -> None:
    @registry.command("queue", "show the running turn and what waits in this conversation")
    async def _queue(ctx: CommandContext) -> str:
        return render_queue(queue.queue_state(ctx.session.key))

    @registry.command(
        "stop",
        "stop the running turn and its subagents' turns now (waiting messages are still answered)",
    )
    async def _stop(ctx: CommandContext) -> str:
        stopped = await stop_family(queue.stop, sessions, ctx.session.key)
        return render_stop(stopped.turn, stopped.descendants)


def render_queue(state: QueueState) -> str:
    if state.active is None and not state.backlog and not state.queued:
        return "Nothing is running in this conversation and nothing is waiting."
    lines = []
    if state.active is not None:
        active = state.active
        lines.append(
            f"Running: {_KIND[active.kind]} in the {active.lane} lane "
            f"for {human_duration(active.seconds)} (job {active.job_id})."
        )
    else:
        lines.append("Nothing is running right now.")
    if state.queued:
        lane = f" for a {state.waiting_lane} lane slot" if state.waiting_lane else ""
        lines.append(f"Waiting{lane}: {state.queued} message(s).")
    if state.backlog:
        lines.append(f"Backlog ({len(state.backlog)}):")
        for number, item in enumerate(state.backlog, 1):
            if item.kind == "message":
                steer = " — runs at the next tool boundary" if item.steers else ""
                lines.append(f"{number}. message: {shorten(item.text, 80)}{steer}")
            elif item.resume is not None:
                steps = len(item.resume.steps)
                lines.append(
                    f"{number}. interrupted task: {shorten(item.resume.task, 80)} "
                    f"({steps} tool call(s) done)"
                )
    return "\n".join(lines)


def render_stop(report: StopReport, subagents: int = 0) -> str:
    """What ``/stop`` did; ``subagents`` is how many subagent turns it stopped with it."""
    also = f" {subagents} subagent turn(s)" if subagents else ""
    if report.elsewhere:
        return "Asked the clawbot process running this conversation to stop its turn."
    if report.stopped:
        text = f"Stopped the running turn and{also}." if also else "Stopped the running turn."
    else:
        text = f"Nothing was running here; stopped{also}." if also else "Nothing was running."
    if report.dropped:
        text += f" Dropped {report.dropped} interrupted task(s) waiting to resume."
    if report.waiting:
        text += f" {report.waiting} waiting message(s) will still be answered."
    return text


_KIND = {
    "message": "a turn",
    "steered": "a turn for messages that interrupted the previous one",
    "backlog": "a [Backlog] turn",
    "recovered": "a turn resumed after a restart",
}
