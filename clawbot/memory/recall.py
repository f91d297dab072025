"""The ``[Context: memory]`` block: the memories relevant to a turn's message, rendered for
that turn's model requests only (the runtime's ephemeral context, as announces are), never
written to the transcript. The active agent's context policy decides whether there is one
(``memory_recall``), where it looks (``recall_from``), what it keeps (``recall_tags``) and
how big it may grow (``recall_items`` memories, ``recall_chars`` characters of text)."""

from __future__ import annotations

import logging

from clawbot.agents.profiles import AgentSpec
from clawbot.errors import ClawbotError
from clawbot.memory.records import MemoryQuery, readable_namespaces
from clawbot.routing.sessions import Session
from clawbot.runtime.plugins import TurnPlugin, TurnStart
from clawbot.scheduling.backlog import shorten
from clawbot.store.protocols.memories import Memories

log = logging.getLogger("clawbot.memory")

MEMORY_BLOCK = "[Context: memory]"
MIN_ITEM_CHARS = 40
"""A memory is cut to fit what is left of the budget, but never to fewer characters."""


async def memory_context(
    memories: Memories, agent: AgentSpec, session: Session, message: str
) -> list[str]:
    """The block for a turn answering ``message`` (none when recall is off or nothing is
    relevant). A store that fails costs the turn its recall, not the turn: one warning."""
    policy = agent.context
    if not policy.memory_recall or not message.strip():
        return []
    query = MemoryQuery(
        text=message,
        session_key=session.key,
        agent_id=agent.agent_id,
        namespaces=readable_namespaces(agent),
        limit=policy.recall_items,
        tags=policy.recall_tags,
    )
    try:
        hits = await memories.search(query)
    except ClawbotError as exc:
        log.warning("session %s: no memory recall this turn: %s", session.key, exc)
        return []
    lines: list[str] = []
    room = policy.recall_chars
    for hit in hits:
        if room < MIN_ITEM_CHARS:
            break
        text = shorten(hit.memory.text, room)
        room -= len(text)
        tags = f" [{', '.join(hit.memory.tags)}]" if hit.memory.tags else ""
        lines.append(f"- {hit.memory.ref}{tags}: {text}")
    if not lines:
        return []
    return [
        f"{MEMORY_BLOCK}\n"
        "What you remember that may bear on this message (recalled for this turn; "
        "memory_get reads one in full):\n" + "\n".join(lines) + "\n[/Context]"
    ]


class MemoryRecall(TurnPlugin):
    """Recall as a turn's ephemeral context, for agents whose context policy asks for it."""

    name = "memory_recall"

    def __init__(self, memories: Memories) -> None:
        self.memories = memories

    async def context(self, turn: TurnStart) -> list[str]:
        if not turn.agent.context.memory_recall:
            return []
        return await memory_context(self.memories, turn.agent, turn.session, turn.message())
