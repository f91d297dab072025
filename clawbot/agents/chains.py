"""The chain of agents from a root session down to a child's, for its log lines.

A child's lines read ``[main>researcher]``: ``grep 'researcher\\]'`` still finds them, and
the chain says who spawned it. The owners never change, so a session's chain is looked up
once from the stored owner keys and then cached.
"""

from __future__ import annotations

from clawbot.lru import LRUCache
from clawbot.routing.sessions import Session
from clawbot.store.protocols.conversations import Sessions

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
        chain = tuple(owner.agent_id for owner in reversed(await owners(self._sessions, session)))
        self._ancestors.put(session.key, chain)
        return chain


async def owners(sessions: Sessions, session: Session) -> list[Session]:
    """The sessions above ``session``, its owner first and the root last; empty for a
    person's session. An owner that is gone ends the list; a malformed chain (a loop)
    stops at ``MAX_CHAIN``."""
    found: list[Session] = []
    seen = {session.key}
    key = session.owner_key
    while key is not None and key not in seen and len(found) < MAX_CHAIN:
        seen.add(key)
        owner = await sessions.get(key)
        if owner is None:
            break
        found.append(owner)
        key = owner.owner_key
    return found
