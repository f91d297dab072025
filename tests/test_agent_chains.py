"""The chain of agents above a session, for its log lines: read from the owner keys once."""

from __future__ import annotations

import pytest

from clawbot.agents.chains import AgentChains
from clawbot.messages import INTERNAL_CHANNEL
from clawbot.routing.sessions import Session, child_key
from clawbot.store import SqliteStore


async def _child(store: SqliteStore, owner: Session, child_id: str, agent_id: str) -> Session:
    key = child_key(owner.key, child_id)
    return await store.sessions.create(
        Session(
            key=key,
            channel=INTERNAL_CHANNEL,
            chat_id=key,
            agent_id=agent_id,
            deliver=False,
            owner_key=owner.key,
        )
    )


async def test_a_grandchilds_ancestors_are_read_once_then_remembered(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = await store.sessions.create(
        Session(key="memory:c1", channel="memory", chat_id="c1", agent_id="main")
    )
    grandchild = await _child(store, await _child(store, root, "r1", "researcher"), "w1", "coder")
    chains = AgentChains(store.sessions)
    lookups: list[str] = []
    get = store.sessions.get

    async def counted(key: str) -> Session | None:
        lookups.append(key)
        return await get(key)

    monkeypatch.setattr(store.sessions, "get", counted)

    first = await chains.ancestors(grandchild)
    again = await chains.ancestors(grandchild)

    assert first == again == ("main", "researcher")
    assert lookups == [child_key("memory:c1", "r1"), "memory:c1"]


async def test_a_session_nobody_owns_has_no_ancestors_and_costs_no_lookup(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(key: str) -> Session | None:
        raise AssertionError(f"looked up {key}")

    monkeypatch.setattr(store.sessions, "get", refuse)

    assert await AgentChains(store.sessions).ancestors(Session("m:a", "m", "a", "main")) == ()


async def test_an_owner_loop_from_a_damaged_database_ends_the_chain(store: SqliteStore) -> None:
    a = Session(key="internal:a", channel=INTERNAL_CHANNEL, chat_id="a", agent_id="main")
    b = Session(key="internal:b", channel=INTERNAL_CHANNEL, chat_id="b", agent_id="coder")
    await store.sessions.create(a)
    await store.sessions.create(b.with_changes(owner_key=a.key))
    await store.transaction(
        lambda db: db.execute("UPDATE sessions SET owner_key = ? WHERE key = ?", (b.key, a.key))
    )

    chain = await AgentChains(store.sessions).ancestors(b.with_changes(owner_key=a.key))

    assert chain == ("main",)
