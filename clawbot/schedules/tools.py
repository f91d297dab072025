"""The model's schedule tools, in ``group:schedules`` (policy-filtered like every tool):
``schedule_create`` and ``schedule_cancel`` are guarded (a person approves them once per
session unless the agent's autonomy is full), ``schedule_list`` only reads. Every call is
audited by the tool gate. A session's tools reach only that session's tasks."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from clawbot.schedules.book import ScheduleBook, describe, render
from clawbot.schedules.when import Trigger
from clawbot.tools.registry import Tool, ToolContext, make_tool

GROUPS = ("group:schedules",)


def schedule_tools(book: ScheduleBook) -> list[Tool]:
    async def schedule_create(
        when: Annotated[
            str,
            Field(
                description="'in 20 minutes', 'every 2 hours', 'cron 0 8 * * 1-5' (a cron "
                "expression) or an ISO time such as '2030-01-31T09:00'"
            ),
        ],
        prompt: Annotated[
            str, Field(description="what to do when it runs, self-contained (you read it then)")
        ],
        ctx: ToolContext,
        timezone: Annotated[
            str, Field(description="IANA time zone of a cron expression or a local time")
        ] = "UTC",
        in_subagent: Annotated[
            bool,
            Field(
                description="run each time in a fresh subagent whose report comes back to "
                "you here, instead of in this conversation itself"
            ),
        ] = False,
    ) -> str:
        """Schedule a prompt to run later in this conversation, once or repeatedly; its
        answer is sent to this chat."""
        task = await book.create(
            ctx.session,
            when,
            prompt,
            tz=timezone,
            created_by=f"agent:{ctx.agent_id}",
            mode="subagent" if in_subagent else "session",
        )
        trigger = Trigger(task.kind, task.spec, task.tz).describe()
        assert task.next_run is not None
        return f"Scheduled {task.id} ({trigger}); first run {task.next_run:%Y-%m-%d %H:%M} UTC."

    async def schedule_list(ctx: ToolContext) -> str:
        """The scheduled tasks of this conversation."""
        tasks = await book.live(ctx.session.key)
        return render(tasks, empty="No scheduled tasks in this conversation.")

    async def schedule_cancel(
        task_id: Annotated[str, Field(description="the task's id, from schedule_list")],
        ctx: ToolContext,
    ) -> str:
        """Cancel a scheduled task of this conversation."""
        task = await book.cancel(task_id, ctx.session.key)
        return f"Cancelled {describe(task)}"

    return [
        make_tool(schedule_create, risk="guarded", groups=GROUPS),
        make_tool(schedule_list, groups=GROUPS),
        make_tool(schedule_cancel, risk="guarded", groups=GROUPS),
    ]
