"""A session's family, read from the stored owner keys: its children and everything below
them, each with its latest turn, and stopping a turn together with its descendants' turns.

Stored sessions, not this process's memory: ``clawbot sessions tree`` beside a running bot
sees the same family that ``/subagents`` in the chat does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from clawbot.agents.chains import MAX_CHAIN, owners
from clawbot.routing.sessions import Session, child_id_of
from clawbot.runtime.usage import format_usd
from clawbot.scheduling.records import StopReport
from clawbot.scheduling.turns import DEADLINE_ERROR
from clawbot.store import SessionActivity, Store
from clawbot.store.protocols.conversations import Sessions

# The session meta key under which spawning keeps a child's record (its label among others).
_SPAWN_RECORD = "subagent"


@dataclass(frozen=True)
class SessionNode:
    """One session of a family, ``depth`` below the one asked about, with its turns."""

    session: Session
    depth: int
    activity: SessionActivity | None

    @property
    def child_id(self) -> str:
        """What a person types to name it: the child id, or the whole key of a root."""
        return child_id_of(self.session.key) or self.session.key

    @property
    def status(self) -> str:
        """Its latest turn's status; ``timeout`` for a turn stopped at its deadline (a
        failed job, reported as ``timeout``: the listings say what the report said);
        ``idle`` before its first turn."""
        if self.activity is None:
            return "idle"
        latest = self.activity.latest
        if latest.status == "failed" and (latest.error or "").startswith(DEADLINE_ERROR):
            return "timeout"
        return latest.status

    @property
    def label(self) -> str | None:
        """The label it was spawned with, if any: session meta ``label``, or the ``label``
        of the spawn's record (meta ``subagent``). Whatever an old row holds, never an error."""
        label = self._meta("label")
        return label if isinstance(label, str) and label.strip() else None

    @property
    def tokens(self) -> int | None:
        """Tokens its model calls used in all, as litellm counted them; else session meta
        ``tokens`` (or the spawn record's), which an older version may have kept."""
        if self.activity is not None and self.activity.tokens is not None:
            return self.activity.tokens
        tokens = self._meta("tokens")
        return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None

    @property
    def cost_usd(self) -> float | None:
        """What its model calls cost in all, in US dollars; None when no call's cost is
        known (a model litellm has no price for)."""
        return self.activity.cost_usd if self.activity is not None else None

    @property
    def usage(self) -> str | None:
        """Its tokens and cost as the listings show them, ``1,234 tokens · $0.012``; None
        when neither is known."""
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        if self.cost_usd is not None:
            parts.append(format_usd(self.cost_usd))
        return " · ".join(parts) or None

    def _meta(self, name: str) -> object:
        meta = self.session.meta
        if name in meta:
            return meta[name]
        record = meta.get(_SPAWN_RECORD)
        return record.get(name) if isinstance(record, dict) else None

    def age(self, now: datetime) -> str:
        """How long ago its first turn began (``"-"`` before any), compactly: ``3m``."""
        if self.activity is None:
            return "-"
        return compact_age((now - self.activity.first_at).total_seconds())


@dataclass(frozen=True)
class FamilyStop:
    """What stopping a session and its descendants did: the session's own stop, and how
    many descendants' running turns were cancelled with it."""

    turn: StopReport
    descendants: int


async def descendants(sessions: Sessions, key: str) -> list[Session]:
    """Every session below ``key``, depth first: each after its parent, siblings oldest
    first. A malformed owner chain (a loop) cannot make it endless."""
    return [node.session for node in await _walk(sessions, key, depth=1, seen={key})]


async def family(store: Store, root: Session) -> list[SessionNode]:
    """``root`` (depth 0) and every session below it, depth first, with their turns."""
    below = await _walk(store.sessions, root.key, depth=1, seen={root.key})
    nodes = [SessionNode(root, 0, None), *below]
    activity = {a.session_key: a for a in await store.jobs.activity([n.session.key for n in nodes])}
    return [SessionNode(n.session, n.depth, activity.get(n.session.key)) for n in nodes]


async def depth_below_root(sessions: Sessions, key: str) -> int:
    """How many owners stand above ``key`` (0 for a person's session)."""
    session = await sessions.get(key)
    return 0 if session is None else len(await owners(sessions, session))


async def roots(sessions: Sessions) -> list[Session]:
    """The sessions at the top of a family (no owner, at least one child), in the order of
    their first child."""
    found: dict[str, Session] = {}
    for key in await sessions.owners():
        session = await sessions.get(key)
        if session is None:
            continue
        top = (await owners(sessions, session) or [session])[-1]
        if top.owner_key is None:
            found.setdefault(top.key, top)
    return list(found.values())


async def children(store: Store, key: str) -> list[SessionNode]:
    """The sessions ``key`` owns, oldest first, with their turns."""
    owned = await store.sessions.children(key)
    activity = {a.session_key: a for a in await store.jobs.activity([s.key for s in owned])}
    return [SessionNode(s, 1, activity.get(s.key)) for s in owned]


class StopSession(Protocol):
    """The scheduler's stop, as a family stop uses it."""

    async def __call__(self, session_key: str, *, with_parent: bool = False) -> StopReport: ...


async def stop_family(stop: StopSession, sessions: Sessions, key: str) -> FamilyStop:
    """Stop ``key``'s running turn, then every descendant's (children, grandchildren...)
    with everything they have waiting: a stopped parent leaves no child working on its
    behalf, and none of them reports back (which would start the parent's turn again)."""
    report = await stop(key)
    stopped = 0
    for session in await descendants(sessions, key):
        if (await stop(session.key, with_parent=True)).stopped is not None:
            stopped += 1
    return FamilyStop(turn=report, descendants=stopped)


async def _walk(sessions: Sessions, key: str, *, depth: int, seen: set[str]) -> list[SessionNode]:
    if depth > MAX_CHAIN:
        return []
    found: list[SessionNode] = []
    for child in await sessions.children(key):
        if child.key in seen:
            continue
        seen.add(child.key)
        found.append(SessionNode(child, depth, None))
        found += await _walk(sessions, child.key, depth=depth + 1, seen=seen)
    return found


def render_tree(nodes: Sequence[SessionNode], now: datetime) -> str:
    """A family as an indented tree, one session a line: its id, agent, latest status,
    label, age, tokens and cost. ``nodes`` come from :func:`family` (depth first)."""
    lines = []
    for node in nodes:
        indent = "  " * node.depth + ("└ " if node.depth else "")
        name = node.child_id if node.depth else node.session.key
        lines.append(f"{indent}{name}  {_summary(node, now)}")
    return "\n".join(lines)


def _summary(node: SessionNode, now: datetime) -> str:
    parts = [node.session.agent_id, node.status]
    if node.activity is not None:
        parts.append(f"{node.activity.turns} turn(s), first {node.age(now)} ago")
    if node.usage is not None:
        parts.append(node.usage)
    if node.label is not None:
        parts.append(repr(node.label))
    return " · ".join(parts)


def compact_age(seconds: float) -> str:
    """``42`` -> ``42s``, ``300`` -> ``5m``, ``7200`` -> ``2h``, ``172800`` -> ``2d``."""
    seconds = max(0.0, seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
