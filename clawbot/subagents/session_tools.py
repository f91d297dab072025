"""The tools an agent uses on its subagents: ``sessions_spawn``, ``sessions_send``,
``sessions_list``, ``sessions_history`` and ``sessions_stop``. They are in the high-risk
``group:sessions``, so an agent other than ``main`` gets one only when its allow list names
it. Refusals (an unknown agent, a limit, a session that is not the caller's child) come
back to the model as clear tool errors."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from clawbot.messages import ToolResultBlock
from clawbot.store.records import COMPACTED_META
from clawbot.subagents.control import ChildStopped, SubagentControl
from clawbot.subagents.injection import TurnOrigin
from clawbot.tools.registry import Tool, ToolContext, make_tool

GROUPS = ("group:sessions",)
HISTORY_CHARS = 400


def _origin(ctx: ToolContext) -> TurnOrigin:
    return TurnOrigin.of(ctx.session, ctx.turn_id, ctx.inputs)


def _stopped(item: ChildStopped) -> str:
    line = f"{item.child_id}: " + ("stopped" if item.report.stopped else "was not running")
    if item.descendants:
        line += f"; stopped {item.descendants} turn(s) of the subagents it started"
    return line


def session_tools(control: SubagentControl) -> list[Tool]:
    """The five tools, bound to one bot's subagents."""

    async def sessions_spawn(
        task: Annotated[str, Field(description="what the subagent should do, self-contained")],
        ctx: ToolContext,
        agent: Annotated[
            str | None, Field(description="the agent to run it (id or name); default: yours")
        ] = None,
        label: Annotated[str | None, Field(description="a short name for the task")] = None,
        timeout: Annotated[
            float | None, Field(description="seconds it may take; default: the setting")
        ] = None,
    ) -> str:
        """Start a subagent on a task in its own session. Returns at once; its result
        arrives later as a '[@agent:...] finish' message with a report."""
        spawned = await control.spawn(
            ctx.session,
            task,
            _origin(ctx),
            agent=agent,
            label=label,
            timeout=timeout,
            turn_id=ctx.turn_id,
        )
        text = (
            f"Spawned {spawned.label!r} as {spawned.child_id} (agent {spawned.agent_id}, "
            f"timeout {spawned.timeout:g} s). It works in the background; its result arrives "
            "as a message when it finishes."
        )
        if spawned.refused_tools:
            text += (
                " Refused to it, because you lack them: " + ", ".join(spawned.refused_tools) + "."
            )
        if spawned.refused_skills:
            text += (
                " Skills refused to it, because you lack them or their tools: "
                + ", ".join(spawned.refused_skills)
                + "."
            )
        return text

    async def sessions_send(
        session: Annotated[
            str, Field(description="the child's id (from sessions_list), or a peer's session key")
        ],
        message: Annotated[str, Field(description="what to tell it")],
        ctx: ToolContext,
    ) -> str:
        """Continue one of your subagents with a new message; its answer arrives later. Or
        message a peer agent's session (its key) when a peer group holds you both."""
        child = await control.send(ctx.session, session, message, _origin(ctx), ctx.turn_id)
        if child.owner_key != ctx.session.key:
            return f"Sent to peer session {child.key}. It answers with sessions_send, if at all."
        return f"Sent to {child.key}. Its answer arrives as a message when it finishes."

    async def sessions_list(ctx: ToolContext) -> str:
        """List your subagents (id, agent, label, whether they are running; delegates
        marked, which are not continued) and the peer sessions you may message with
        sessions_send."""
        views = await control.children(ctx.session)
        lines = [
            f"- {v.child_id}: agent {v.agent_id}, {v.state}, {v.label!r}"
            + (", a delegate (its answer was its tool call's result)" if v.delegate else "")
            for v in views
        ]
        if not lines:
            lines.append("You have no subagents.")
        peers = await control.peer_sessions(ctx.session)
        if peers:
            lines.append("Peers (sessions_send with the key):")
            lines += [f"- {p.key}: agent {p.agent_id}, group {', '.join(p.groups)}" for p in peers]
        return "\n".join(lines)

    async def sessions_history(
        session: Annotated[str, Field(description="the child's id (from sessions_list)")],
        ctx: ToolContext,
        limit: Annotated[int, Field(ge=1, le=200, description="how many messages")] = 20,
    ) -> str:
        """Read the last messages of one of your subagents' sessions. Messages marked
        (compacted) are summarized in its context; they are shown as they were."""
        entries = await control.history(ctx.session, session, limit)
        if not entries:
            return "It has no messages yet."
        lines = []
        for entry in entries:
            parts = [entry.text] if entry.text else []
            parts.extend(f"[called {call.name}]" for call in entry.tool_calls)
            parts.extend(
                f"[{block.name} -> {block.content}]"
                for block in entry.content
                if isinstance(block, ToolResultBlock)
            )
            text = " ".join(" ".join(parts).split())
            if len(text) > HISTORY_CHARS:
                text = text[: HISTORY_CHARS - 1] + "…"
            marker = " (compacted)" if COMPACTED_META in entry.meta else ""
            lines.append(f"{entry.role}{marker}: {text}")
        return "\n".join(lines)

    async def sessions_stop(
        session: Annotated[str, Field(description="the child's id, or 'all'")],
        ctx: ToolContext,
    ) -> str:
        """Stop one of your subagents' running turn, or all of them, with every subagent
        they started in turn."""
        stopped = await control.stop(ctx.session, session)
        if not stopped:
            return "You have no subagents."
        return "\n".join(_stopped(item) for item in stopped)

    # Nobody is asked to approve a spawn or a message that could not run anyway.
    async def spawnable(arguments: Any, ctx: ToolContext) -> None:
        await control.check_spawn(
            ctx.session,
            arguments.task,
            _origin(ctx),
            agent=arguments.agent,
            label=arguments.label,
            timeout=arguments.timeout,
            turn_id=ctx.turn_id,
        )

    async def sendable(arguments: Any, ctx: ToolContext) -> None:
        await control.check_send(
            ctx.session, arguments.session, arguments.message, _origin(ctx), ctx.turn_id
        )

    return [
        make_tool(sessions_spawn, risk="guarded", groups=GROUPS, precheck=spawnable),
        make_tool(sessions_send, risk="guarded", groups=GROUPS, precheck=sendable),
        make_tool(sessions_list, risk="safe", groups=GROUPS),
        make_tool(sessions_history, risk="safe", groups=GROUPS),
        make_tool(sessions_stop, risk="guarded", groups=GROUPS),
    ]
