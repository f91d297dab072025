"""The memory tools: ``memory_store``, ``memory_search``, ``memory_get`` and
``memory_forget``, in ``group:memory`` (policy-filtered like every tool).

An agent writes and forgets only in its own namespace (its agent id); it reads its own and
the namespaces its context policy lists in ``recall_from`` (see ``clawbot.memory``). Every
call carries the session and agent it came from: a write records them, and a search ranks
their memories first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import Field

from clawbot.agents.profiles import AgentSpec
from clawbot.errors import ToolError
from clawbot.memory.records import (
    Memory,
    MemoryQuery,
    check_key,
    check_tags,
    check_text,
    readable_namespaces,
    split_ref,
)
from clawbot.scheduling.backlog import shorten
from clawbot.store.protocols.memories import Memories
from clawbot.tools.registry import Tool, ToolContext, make_tool

GROUPS = ("group:memory",)
SEARCH_LINE_CHARS = 300
MAX_SEARCH_RESULTS = 20

AgentLookup = Callable[[str], AgentSpec]


def memory_tools(memories: Memories, agents: AgentLookup) -> list[Tool]:
    """The four tools, bound to one bot's memories; ``agents`` gives the calling agent's
    profile (for the namespaces it may read)."""

    async def memory_store(
        key: Annotated[str, Field(description="a short name for it, e.g. 'favourite-colour'")],
        text: Annotated[str, Field(description="what to remember, self-contained")],
        ctx: ToolContext,
        tags: Annotated[
            list[str], Field(description="a few words to group it by, e.g. ['prefs']")
        ] = [],  # noqa: B006 - pydantic copies defaults
    ) -> str:
        """Remember a fact for later conversations, under a key (storing under a key again
        replaces what it held)."""
        key = check_key(key)
        text = check_text(text, ctx.settings.memory_max_chars)
        stored = await memories.put(
            namespace=ctx.agent_id,
            key=key,
            text=text,
            tags=check_tags(tags),
            session_key=ctx.session.key,
            agent_id=ctx.agent_id,
        )
        verb = "Stored" if stored.created_at == stored.updated_at else "Updated"
        return f"{verb} {stored.ref} ({len(text):,} characters)."

    async def memory_search(
        query: Annotated[str, Field(description="words to look for")],
        ctx: ToolContext,
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_RESULTS)] = 5,
        tags: Annotated[list[str], Field(description="only memories with one of these tags")] = [],  # noqa: B006 - pydantic copies defaults
    ) -> str:
        """Search your memories (and those of the agents you recall from) by words; the
        best matches first, this conversation's first among equals."""
        if not query.strip():
            raise ToolError("the query is empty", hint="give a few words to look for")
        hits = await memories.search(
            MemoryQuery(
                text=query,
                session_key=ctx.session.key,
                agent_id=ctx.agent_id,
                namespaces=readable_namespaces(agents(ctx.agent_id)),
                limit=limit,
                tags=check_tags(tags),
            )
        )
        if not hits:
            return f"No memory matches {shorten(query, 80)!r}."
        return "\n".join(_line(hit.memory) for hit in hits)

    async def memory_get(
        key: Annotated[str, Field(description="its key, or namespace:key for another agent's")],
        ctx: ToolContext,
    ) -> str:
        """Read one memory in full."""
        namespace, key = split_ref(key, ctx.agent_id)
        readable = readable_namespaces(agents(ctx.agent_id))
        if readable is not None and namespace not in readable:
            raise ToolError(
                f"you do not recall from the memories of {namespace!r}",
                hint="its agent must be in your context policy's recall_from",
            )
        memory = await memories.get(namespace, key)
        if memory is None:
            raise ToolError(f"no memory {namespace}:{key}", hint="memory_search finds keys")
        tags = f"\nTags: {', '.join(memory.tags)}" if memory.tags else ""
        return (
            f"{memory.ref} (written by {memory.agent_id} in {memory.session_key},"
            f" {memory.updated_at:%Y-%m-%d %H:%M} UTC){tags}\n\n{memory.text}"
        )

    async def memory_forget(
        key: Annotated[str, Field(description="the key of one of your memories")],
        ctx: ToolContext,
    ) -> str:
        """Forget one of your own memories."""
        namespace, key = split_ref(key, ctx.agent_id)
        if namespace != ctx.agent_id:
            raise ToolError(
                f"{namespace}:{key} is another agent's memory; you forget only your own",
            )
        if not await memories.forget(namespace, key):
            raise ToolError(f"no memory {namespace}:{key}", hint="memory_search finds keys")
        return f"Forgot {namespace}:{key}."

    # Reading memories is safe; writing or forgetting one is a write, so guarded.
    return [
        make_tool(memory_store, risk="guarded", groups=GROUPS),
        make_tool(memory_search, groups=GROUPS),
        make_tool(memory_get, groups=GROUPS),
        make_tool(memory_forget, risk="guarded", groups=GROUPS),
    ]


def _line(memory: Memory) -> str:
    tags = f" [{', '.join(memory.tags)}]" if memory.tags else ""
    return f"- {memory.ref}{tags}: {shorten(memory.text, SEARCH_LINE_CHARS)}"
