"""The chain of agents from a root session down to a child's, for its log lines.

A child's lines read ``[main>researcher]``: ``grep 'researcher\\]'`` still finds them, and
the chain says who spawned it. The owners never change, so a session's chain is looked up
once from the stored owner keys and then cached.
"""

from __future__ import annotations

from clawbot.lru import LRUCache
from clawbot.sessions import Session
from clawbot.store.interface import Sessions

# Deeper than any allowed spawn depth: a malformed owner chain cannot make a lookup endless.
MAX_CHAIN = 16


class AgentChains:
    """The agents of a session's ancestors, root first, cached per session."""

    def __init__(self, sessions: Sessions, *, max_sessions: int = 1024) -> None:
        self._sessions = sessions
        self._ancestors: LRUCache[str, tuple[str, ...]] = LRUCache(max_sessions)

    async def ancestors(self, session: Session) -> tuple[str, ...]:
        """The agent ids of ``session``'s owner, its owner's owner..., root first; empty
        (and free) for a session nobody owns."""
        if session.owner_key is None:
            return ()
        cached = self._ancestors.get(session.key)
        if cached is not None:
            return cached
        agents: list[str] = []
        seen = {session.key}
        key: str | None = session.owner_key
        while key is not None and key not in seen and len(agents) < MAX_CHAIN:
            seen.add(key)
            owner = await self._sessions.get(key)
            if owner is None:
                break
            agents.append(owner.agent_id)
            key = owner.owner_key
        chain = tuple(reversed(agents))
        self._ancestors.put(session.key, chain)
        return chain
