"""``/schedule``: a chat's scheduled tasks, from the chat and without a model call.
``/schedule add <when> | <prompt>`` creates one (``add subagent <when> | <prompt>``: each
run in a fresh subagent whose report comes back to the chat), ``/schedule list`` shows this
chat's, ``/schedule cancel <id>`` cancels one of them (another chat's tasks are neither
shown nor cancelled from here)."""

from __future__ import annotations

from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.errors import ScheduleError
from clawbot.schedules.book import ScheduleBook, describe, render
from clawbot.schedules.records import TaskMode
from clawbot.schedules.when import Trigger

USAGE = "add <when> | <prompt>, list, or cancel <id>"
ADD_EXAMPLE = (
    "e.g. /schedule add cron 0 8 * * * tz Europe/Berlin | the weather (8:00 daily), "
    "or /schedule add in 20 minutes | remind me of the oven"
)


def split_zone(when: str) -> tuple[str, str]:
    """``'cron 0 8 * * * tz Europe/Berlin'`` -> ``('cron 0 8 * * *', 'Europe/Berlin')``."""
    head, found, zone = when.rpartition(" tz ")
    return (head, zone.strip()) if found else (when, "UTC")


def register_schedule_commands(registry: CommandRegistry, book: ScheduleBook) -> None:
    @registry.command("schedule", "this chat's scheduled tasks: add, list, cancel", usage=USAGE)
    async def _schedule(ctx: CommandContext) -> str:
        verb, _, rest = ctx.args.strip().partition(" ")
        verb = verb.lower() or "list"
        try:
            if verb == "list":
                tasks = await book.live(ctx.session.key)
                return render(tasks, empty="No scheduled tasks in this chat. " + ADD_EXAMPLE)
            if verb == "cancel":
                if not rest.strip():
                    return "Say which task: /schedule cancel <id> (/schedule list shows them)."
                return f"Cancelled {describe(await book.cancel(rest, ctx.session.key))}"
            if verb == "add":
                return await _add(ctx, book, rest)
        except ScheduleError as exc:
            return f"Could not do that: {exc}"
        return f"/schedule {verb}? Use /schedule {USAGE}."


async def _add(ctx: CommandContext, book: ScheduleBook, rest: str) -> str:
    when, bar, prompt = rest.partition("|")
    if not bar or not when.strip():
        return f"Give a time and a prompt, split by '|': {ADD_EXAMPLE}."
    when, zone = split_zone(when.strip())
    mode: TaskMode = "session"
    if when.lower().startswith("subagent "):
        mode, when = "subagent", when[len("subagent ") :]
    task = await book.create(
        ctx.session, when, prompt, tz=zone, created_by=ctx.message.sender_id, mode=mode
    )
    assert task.next_run is not None
    trigger = Trigger(task.kind, task.spec, task.tz).describe()
    return (
        f"Scheduled {task.id} ({trigger}); first run {task.next_run:%Y-%m-%d %H:%M} UTC. "
        f"/schedule cancel {task.id} cancels it."
    )
