"""A session's scheduled tasks as people and the model manage them: create (under the
per-session cap), list and cancel. Tools, ``/schedule`` and ``clawbot schedule`` all come
here, so each keeps the same rules: a task belongs to one session, and is seen and
cancelled from that session only (the shell's operator sees them all)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from clawbot.clock import Clock
from clawbot.errors import ScheduleError
from clawbot.routing.sessions import Session
from clawbot.schedules.records import ScheduledTask, TaskMode
from clawbot.schedules.when import Trigger, parse_when
from clawbot.settings import Settings
from clawbot.store import Store, new_id

MAX_PROMPT_CHARS = 4000
PROMPT_LINE_CHARS = 80


class ScheduleBook:
    """Creates, lists and cancels tasks; ``changed`` is told of a new task (the runner's
    loop wakes to look at its due time)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        clock: Clock,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.changed = changed

    async def create(
        self,
        session: Session,
        when: str,
        prompt: str,
        *,
        tz: str = "UTC",
        created_by: str = "",
        mode: TaskMode = "session",
    ) -> ScheduledTask:
        """A new task of ``session`` (its active agent's), or a ScheduleError saying why
        not: an unreadable time, a time past, an empty prompt, the session's cap reached.
        ``mode`` ``subagent``: each run goes to a fresh subagent of the session."""
        prompt = prompt.strip()
        if not prompt:
            raise ScheduleError(
                "the task has no prompt", hint="say what the agent should do when it runs"
            )
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ScheduleError(
                f"the prompt is {len(prompt):,} characters (at most {MAX_PROMPT_CHARS:,})",
                hint="shorten it; a file in the workspace can hold the details",
            )
        now = self.clock.now()
        trigger = parse_when(when, now=now, tz=tz, min_interval=self.settings.schedule_min_interval)
        task = ScheduledTask(
            id=new_id("sch"),
            session_key=session.key,
            agent_id=session.agent_id,
            kind=trigger.kind,
            spec=trigger.spec,
            tz=trigger.tz,
            prompt=prompt,
            status="active",
            next_run=trigger.first_run(now),
            created_by=created_by,
            mode=mode,
        )
        cap = self.settings.schedules_per_session
        if not await self.store.schedules.create(task, cap=cap):
            raise ScheduleError(
                f"this conversation already has {cap} scheduled tasks (the limit)",
                hint="cancel one first (/schedule list shows them), or raise "
                "CLAWBOT_SCHEDULES_PER_SESSION",
            )
        self.changed()
        return task

    async def live(self, session_key: str | None) -> list[ScheduledTask]:
        """The active and paused tasks of ``session_key`` (None: every session's)."""
        return await self.store.schedules.live(session_key)

    async def cancel(self, task_id: str, session_key: str | None) -> ScheduledTask:
        """Cancel a task of ``session_key`` (None: of any session); a ScheduleError when
        that session holds no such live task (another session's task is not named)."""
        task = await self.store.schedules.cancel(task_id.strip(), session_key)
        if task is None:
            raise ScheduleError(
                f"no scheduled task {task_id.strip()!r} in this conversation",
                hint="/schedule list shows the ids of this conversation's tasks",
            )
        return task


def describe(task: ScheduledTask) -> str:
    """One line for a list: id, trigger, next time, state, the prompt's start."""
    trigger = Trigger(task.kind, task.spec, task.tz).describe()
    when = f"next {task.next_run:%Y-%m-%d %H:%M} UTC" if task.next_run else "no next run"
    state = f", paused after {task.failures} failed runs" if task.status == "paused" else ""
    state += ", in a subagent" if task.mode == "subagent" else ""
    prompt = " ".join(task.prompt.split())
    if len(prompt) > PROMPT_LINE_CHARS:
        prompt = prompt[: PROMPT_LINE_CHARS - 1] + "…"
    return f"{task.id}: {trigger}; {when}{state} — {prompt}"


def render(tasks: Sequence[ScheduledTask], *, empty: str) -> str:
    if not tasks:
        return empty
    return "\n".join(describe(task) for task in tasks)
