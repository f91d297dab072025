"""``/compact [instructions]``: summarize the older part of this conversation now, so it
takes less of the model's window (the originals stay stored; see ``clawbot.runtime.compaction``)."""

from __future__ import annotations

from collections.abc import Callable

from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.errors import CompactionError
from clawbot.routing.sessions import Session
from clawbot.runtime.compaction import Compactor


def register_compaction_commands(
    registry: CommandRegistry, compactor: Compactor, model_of: Callable[[Session], str]
) -> None:
    """``model_of`` names the model a session's turns use: its own summarizes it."""

    @registry.command(
        "compact",
        "summarize the older part of this conversation so it takes less room",
        usage="[what the summary should keep]",
    )
    async def _compact(ctx: CommandContext) -> str:
        keep = compactor.settings.compaction_keep_turns
        try:
            report = await compactor.compact(
                ctx.session, model_of(ctx.session), instructions=ctx.args
            )
        except CompactionError as exc:
            return f"Could not compact: {exc.message}. The conversation is unchanged."
        if report is None:
            return f"Nothing to compact yet: the last {keep} turns are always kept as they are."
        return (
            f"Compacted {report.messages} earlier messages into a summary; the last "
            f"{report.kept_turns} turns stay as they were. The originals stay stored."
        )
