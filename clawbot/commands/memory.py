"""``/memory``: what the active agent remembers about this conversation, from the chat and
without a model call. ``/memory`` lists the memories written in this conversation;
``/memory <words>`` searches everything the agent recalls from, as its recall would."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from clawbot.agents.profiles import AgentSpec
from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.memory.records import Memory, MemoryQuery, readable_namespaces
from clawbot.scheduling.backlog import shorten
from clawbot.store.protocols.memories import Memories

SHOWN = 20
LINE_CHARS = 200
NOTHING = (
    "Nothing is remembered from this conversation yet. The agent remembers with the "
    "memory_store tool; /memory <words> searches everything it recalls from."
)


def register_memory_commands(
    registry: CommandRegistry, memories: Memories, agents: Callable[[str], AgentSpec]
) -> None:
    @registry.command(
        "memory",
        "what the agent remembers about this conversation, or a search of its memories",
        usage="[words to search for]",
    )
    async def _memory(ctx: CommandContext) -> str:
        agent = agents(ctx.session.agent_id)
        namespaces = readable_namespaces(agent)
        words = ctx.args.strip()
        if words:
            hits = await memories.search(
                MemoryQuery(
                    text=words,
                    session_key=ctx.session.key,
                    agent_id=agent.agent_id,
                    namespaces=namespaces,
                    limit=SHOWN,
                )
            )
            if not hits:
                return f"{agent.label} remembers nothing that matches {shorten(words, 80)!r}."
            return _render(
                f"{agent.label} remembers ({len(hits)} best matches):", [h.memory for h in hits]
            )
        written = await memories.written_in(ctx.session.key, namespaces, SHOWN)
        if not written:
            return NOTHING
        return _render(
            f"{agent.label} remembers from this conversation ({len(written)}, newest first):",
            written,
        )


def _render(title: str, found: Sequence[Memory]) -> str:
    lines = [title]
    for memory in found:
        tags = f" [{', '.join(memory.tags)}]" if memory.tags else ""
        lines.append(f"• {memory.ref}{tags}: {shorten(memory.text, LINE_CHARS)}")
    return "\n".join(lines)
