"""``clawbot schedule``: every session's scheduled tasks from the shell (the operator's
view): list them, add one to a session, cancel one. A running bot picks a new task up
within a minute (its loop looks at the database at least that often)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from clawbot.cli.common import HomeOption, fail, load, with_store

if TYPE_CHECKING:
    from clawbot.schedules.records import ScheduledTask, TaskMode
    from clawbot.store import Store


app = typer.Typer(help="List, add and cancel scheduled tasks.", no_args_is_help=True)


@app.command("list")
def schedule_list(
    session: Annotated[str | None, typer.Option(help="only this session's tasks (its key)")] = None,
    home: HomeOption = None,
) -> None:
    """Show the active and paused tasks: id, session, when, next run, prompt."""
    from clawbot.schedules.book import describe

    async def read(store: Store) -> list[ScheduledTask]:
        return await store.schedules.live(session)

    tasks = with_store(load(home=home), read)
    if not tasks:
        print("No scheduled tasks.")
    for task in tasks:
        print(f"{task.session_key}  {describe(task)}")


@app.command("add")
def schedule_add(
    session: Annotated[str, typer.Argument(help="the session's key (clawbot sessions tree)")],
    when: Annotated[
        str,
        typer.Argument(help="'in 20 minutes', 'every 2 hours', 'cron 0 8 * * 1-5' or an ISO time"),
    ],
    prompt: Annotated[str, typer.Argument(help="what the agent does when it runs")],
    tz: Annotated[str, typer.Option(help="IANA time zone of a cron expression")] = "UTC",
    subagent: Annotated[
        bool, typer.Option("--subagent", help="run each time in a fresh subagent of the session")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Add a task to a session; it runs with the session's agent and answers its chat."""
    from clawbot.clock import SystemClock
    from clawbot.schedules.book import ScheduleBook, describe

    async def add(store: Store) -> ScheduledTask | None:
        target = await store.sessions.get(session)
        if target is None:
            return None
        book = ScheduleBook(settings=settings, store=store, clock=SystemClock())
        mode: TaskMode = "subagent" if subagent else "session"
        return await book.create(target, when, prompt, tz=tz, created_by="cli", mode=mode)

    settings = load(home=home)
    task = with_store(settings, add)
    if task is None:
        fail(f"no session has the key {session!r} (`clawbot schedule list` shows some)", 1)
    print(f"Scheduled {describe(task)}")


@app.command("cancel")
def schedule_cancel(
    task_id: Annotated[str, typer.Argument(help="the task's id (clawbot schedule list)")],
    home: HomeOption = None,
) -> None:
    """Cancel a task of any session."""
    from clawbot.clock import SystemClock
    from clawbot.schedules.book import ScheduleBook, describe

    async def cancel(store: Store) -> ScheduledTask:
        book = ScheduleBook(settings=settings, store=store, clock=SystemClock())
        return await book.cancel(task_id, None)

    settings = load(home=home)
    print(f"Cancelled {describe(with_store(settings, cancel))}")
