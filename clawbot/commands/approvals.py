"""``/approve``, ``/deny`` and ``/grants``: answering approval requests from the chat, and
seeing and clearing what was granted (the buttons under a request send the same commands)."""

from __future__ import annotations

import logging

from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.security.approval_records import ApprovalScope
from clawbot.security.approvals import Approvals

log = logging.getLogger("clawbot.approvals")

USAGE_APPROVE = "Usage: /approve <id> [once|session] (the id is in the request)."


def _refused(approvals: Approvals, ctx: CommandContext, request_id: str) -> None:
    """A person who may not answer tried to: they alone are told why (where the platform
    can: the group need not read every refusal), and the operator sees who and where."""
    if not approvals.may_answer(ctx.session, ctx.message.sender_id):
        ctx.private = True
        log.info(
            "refused an answer to approval %s from %s in %s: not an approver (CLAWBOT_APPROVERS)",
            request_id,
            ctx.message.sender_id,
            ctx.session.key,
        )


def register_approval_commands(registry: CommandRegistry, approvals: Approvals) -> None:
    @registry.command(
        "approve", "approve a tool call that waits for you: /approve <id> [once|session]"
    )
    async def _approve(ctx: CommandContext) -> str:
        words = ctx.args.split()
        if not words or len(words) > 2:
            return USAGE_APPROVE
        scope: ApprovalScope
        if len(words) == 1 or words[1].lower() == "once":
            scope = "once"
        elif words[1].lower() == "session":
            scope = "session"
        else:
            return USAGE_APPROVE
        _refused(approvals, ctx, words[0])
        return await approvals.answer(
            words[0],
            approve=True,
            scope=scope,
            chat=ctx.session,
            sender_id=ctx.message.sender_id,
            sender_name=ctx.message.sender_name,
        )

    @registry.command("deny", "deny a tool call that waits for you: /deny <id>")
    async def _deny(ctx: CommandContext) -> str:
        words = ctx.args.split()
        if len(words) != 1:
            return "Usage: /deny <id> (the id is in the request)."
        _refused(approvals, ctx, words[0])
        return await approvals.answer(
            words[0],
            approve=False,
            scope="once",
            chat=ctx.session,
            sender_id=ctx.message.sender_id,
            sender_name=ctx.message.sender_name,
        )

    @registry.command("grants", "list what tools may do without asking here; /grants clear")
    async def _grants(ctx: CommandContext) -> str:
        words = ctx.args.split()
        if words == ["clear"]:
            if not approvals.may_answer(ctx.session, ctx.message.sender_id):
                return "Only this chat's approvers can clear its grants (CLAWBOT_APPROVERS)."
            return await approvals.grants.clear(ctx.session)
        if words:
            return "Usage: /grants, or /grants clear."
        return await approvals.grants.text(ctx.session)
