"""``/subagents``: see this conversation's subagents (its child sessions), stop them and
read what they are doing, from the chat and without a model call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from clawbot.clock import Clock
from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.messages import TextBlock, ToolCallBlock, ToolResultBlock, TranscriptEntry
from clawbot.runtime.usage import format_usd
from clawbot.scheduling.backlog import shorten
from clawbot.scheduling.records import StopReport
from clawbot.store import Store
from clawbot.subagents.tree import SessionNode, children, stop_family

USAGE = "Usage: /subagents (list them), /subagents stop <id|all>, /subagents log <id>."
NO_CHILDREN = "This conversation has no subagents."
# /subagents log shows the last LOG_MESSAGES messages, each cut to LOG_LINE_CHARS.
LOG_MESSAGES = 10
LOG_LINE_CHARS = 300


class SubagentControl(Protocol):
    """What ``/subagents`` asks of the scheduler: stopping one session's running turn."""

    async def stop(self, session_key: str, *, with_parent: bool = False) -> StopReport: ...


def register_subagent_commands(
    registry: CommandRegistry, store: Store, control: SubagentControl, clock: Clock
) -> None:
    @registry.command(
        "subagents",
        "list this conversation's subagents, stop one or read its last messages",
        usage="[stop <id|all> | log <id>]",
    )
    async def _subagents(ctx: CommandContext) -> str:
        action, _, ref = ctx.args.partition(" ")
        action, ref = action.lower(), ref.strip()
        if action not in ("", "list", "stop", "log"):
            return USAGE
        nodes = await children(store, ctx.session.key)
        if not nodes:
            return NO_CHILDREN
        if action in ("", "list"):
            return render_children(nodes, clock)
        if action == "stop" and ref.lower() == "all":
            return await _stop_all(store, control, nodes)
        node = next((n for n in nodes if n.child_id == ref), None)
        if node is None:
            return _unknown(ref, nodes)
        if action == "stop":
            return await _stop_one(store, control, node)
        return await _log(store, node)


def render_children(nodes: Sequence[SessionNode], clock: Clock) -> str:
    now = clock.now()
    lines = [f"Subagents ({len(nodes)}) — id · agent · label · status · age · tokens:"]
    for node in nodes:
        tokens = f"{node.tokens:,}" if node.tokens is not None else "-"
        if node.cost_usd is not None:
            tokens += f" ({format_usd(node.cost_usd)})"
        label = shorten(node.label, 40) if node.label is not None else "-"
        lines.append(
            f"• {node.child_id} · {node.session.agent_id} · {label} · {node.status}"
            f" · {node.age(now)} · {tokens}"
        )
    lines.append("Stop with /subagents stop <id|all>; read one with /subagents log <id>.")
    return "\n".join(lines)


def _unknown(ref: str, nodes: Sequence[SessionNode]) -> str:
    valid = ", ".join(node.child_id for node in nodes)
    if not ref:
        return f"Name a subagent: {valid}."
    return f"No subagent has the id {ref!r}; the ids are: {valid}."


async def _stop_one(store: Store, control: SubagentControl, node: SessionNode) -> str:
    stopped = await stop_family(control.stop, store.sessions, node.session.key)
    below = f"{stopped.descendants} of its subagents' turn(s)"
    if stopped.turn.stopped is not None:
        also = f" and {below}" if stopped.descendants else ""
        return f"Stopped {node.child_id}'s running turn{also}."
    if stopped.descendants:
        return f"{node.child_id} was not running; stopped {below}."
    return f"{node.child_id} was not running."


async def _stop_all(store: Store, control: SubagentControl, nodes: Sequence[SessionNode]) -> str:
    count = 0
    for node in nodes:
        stopped = await stop_family(control.stop, store.sessions, node.session.key)
        count += (stopped.turn.stopped is not None) + stopped.descendants
    if not count:
        return "No subagent was running."
    return f"Stopped {count} running subagent turn(s)."


async def _log(store: Store, node: SessionNode) -> str:
    session = node.session
    entries = await store.transcripts.load(session.key, session.epoch, limit=LOG_MESSAGES)
    if not entries:
        return f"{node.child_id} has no messages yet."
    lines = [f"Last {len(entries)} message(s) of {node.child_id} ({session.agent_id}):"]
    lines += [shorten(_line(entry), LOG_LINE_CHARS) for entry in entries]
    return "\n".join(lines)


def _line(entry: TranscriptEntry) -> str:
    """One message as one line: its role, its text, the tools it called or what they gave."""
    parts = []
    for block in entry.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            arguments = json.dumps(block.arguments, ensure_ascii=False)
            parts.append(f"→ {block.name}({shorten(arguments, 80)})")
        elif isinstance(block, ToolResultBlock):
            mark = "error" if block.is_error else "result"
            parts.append(f"← {block.name} {mark}: {block.content}")
        else:
            parts.append(block.label)
    return f"{entry.role}: {' '.join(parts)}"
