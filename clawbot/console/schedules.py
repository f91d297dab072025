"""Every scheduled task, ended ones too, with a button to cancel each live one. A cancel
goes through ``ScheduleBook.cancel``, the path of ``/schedule cancel`` and ``clawbot
schedule cancel`` (the operator may cancel any session's task), and is audited with the
operator as actor."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawbot.console.context import ConsoleContext
from clawbot.console.operator import audit_change
from clawbot.console.rendering import render
from clawbot.errors import ScheduleError
from clawbot.schedules.book import ScheduleBook
from clawbot.schedules.records import ScheduledTask
from clawbot.schedules.when import Trigger

SHOWN = 500


@dataclass(frozen=True)
class TaskRow:
    """A task as the page shows it: its trigger in words, and whether it can be cancelled."""

    task: ScheduledTask
    trigger: str
    live: bool


def _row(task: ScheduledTask) -> TaskRow:
    trigger = Trigger(task.kind, task.spec, task.tz).describe()
    return TaskRow(task, trigger, task.status in ("active", "paused"))


def _book(context: ConsoleContext) -> ScheduleBook:
    return ScheduleBook(settings=context.settings, store=context.store, clock=context.clock)


async def _page(request: Request, notice: str = "", problem: str = "") -> Response:
    context: ConsoleContext = request.app.state.console
    tasks = await context.store.schedules.every(SHOWN)
    rows = [_row(task) for task in tasks]
    return render(request, "schedules.html", rows=rows, notice=notice, problem=problem)


async def schedules_page(request: Request) -> Response:
    return await _page(request)


async def cancel(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    task_id = str(request.path_params["task_id"])
    try:
        task = await _book(context).cancel(task_id, None)
    except ScheduleError:
        return await _page(request, problem=f"No live scheduled task {task_id} (ended already?).")
    await audit_change(context, "schedule_cancel", task=task.id, session=task.session_key)
    return await _page(request, notice=f"Cancelled {task.id}.")


routes = [
    Route("/schedules", schedules_page),
    Route("/schedules/{task_id}/cancel", cancel, methods=["POST"]),
]
