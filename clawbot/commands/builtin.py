"""The commands every bot has: /start, /help, /new (or /reset) and /status."""

from __future__ import annotations

from clawbot.commands.registry import CommandContext, CommandRegistry


def builtin_commands() -> CommandRegistry:
    registry = CommandRegistry()

    @registry.command("start", "say hello and show what to do")
    async def _start(ctx: CommandContext) -> str:
        return (
            "Hi! Write to me in plain words and the agent answers. "
            + "Type /help for the commands."
        )

    @registry.command("help", "show this list")
    async def _help(ctx: CommandContext) -> str:
        return registry.help_text()

    @registry.command(
        "new", "start a new conversation (the old one stays stored)", aliases=("reset",)
    )
    async def _new(ctx: CommandContext) -> str:
        await ctx.update_session(epoch=ctx.session.epoch + 1)
        return "Started a new conversation. The agent no longer sees the earlier messages."

    @registry.command("status", "show this conversation's agent, model and size")
    async def _status(ctx: CommandContext) -> str:
        return await ctx.sessions.status_text(ctx.session)

    return registry
