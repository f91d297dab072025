"""The memory store: namespaced keys, full-text search ranked with bm25 (the asking session
and agent first), and queries that are always safe, whatever characters they hold."""

from __future__ import annotations

import pytest

from clawbot.memory.records import MemoryQuery
from clawbot.store import Store


@pytest.fixture
def store(each_store: Store) -> Store:
    """Every test here runs on each backend: SQLite and PostgreSQL."""
    return each_store


async def remember(
    store: Store,
    key: str,
    text: str,
    *,
    namespace: str = "main",
    tags: tuple[str, ...] = (),
    session: str = "m:a",
    agent: str = "main",
) -> None:
    await store.memories.put(
        namespace=namespace, key=key, text=text, tags=tags, session_key=session, agent_id=agent
    )


async def found(
    store: Store,
    text: str,
    *,
    session: str = "m:a",
    agent: str = "main",
    namespaces: tuple[str, ...] | None = None,
    tags: tuple[str, ...] = (),
) -> list[str]:
    query = MemoryQuery(
        text=text, session_key=session, agent_id=agent, namespaces=namespaces, tags=tags
    )
    return [hit.memory.ref for hit in await store.memories.search(query)]


async def test_a_stored_memory_is_found_by_a_word_of_its_text(store: Store) -> None:
    await remember(store, "colour", "The user's favourite colour is blue")
    await remember(store, "pet", "The user has a cat called Miso")

    assert await found(store, "what is my favourite colour?") == ["main:colour"]


async def test_storing_under_a_key_again_replaces_the_text_and_keeps_its_creation_time(
    store: Store,
) -> None:
    await remember(store, "colour", "blue")
    first = await store.memories.get("main", "colour")
    await remember(store, "colour", "green", session="m:b")

    memory = await store.memories.get("main", "colour")
    assert first is not None and memory is not None
    assert (memory.text, memory.session_key) == ("green", "m:b")
    assert memory.created_at == first.created_at
    assert memory.updated_at > first.updated_at
    assert await store.memories.count() == 1


async def test_the_index_follows_changes_and_deletions(store: Store) -> None:
    await remember(store, "colour", "blue")
    await remember(store, "colour", "green")

    assert await found(store, "blue") == []
    assert await found(store, "green") == ["main:colour"]
    assert await store.memories.forget("main", "colour")
    assert await found(store, "green") == []
    assert not await store.memories.forget("main", "colour")


async def test_the_same_key_in_two_namespaces_is_two_memories(store: Store) -> None:
    await remember(store, "colour", "main likes blue")
    await remember(store, "colour", "worker likes red", namespace="worker", agent="worker")

    main, worker = (
        await store.memories.get("main", "colour"),
        await store.memories.get("worker", "colour"),
    )
    assert main is not None and worker is not None
    assert (main.text, worker.text) == ("main likes blue", "worker likes red")
    assert await found(store, "likes", namespaces=("worker",)) == ["worker:colour"]


async def test_the_asking_sessions_memory_ranks_first(store: Store) -> None:
    await remember(store, "one", "the meeting is on tuesday", session="m:a")
    await remember(store, "two", "the meeting is on tuesday", session="m:b")

    assert await found(store, "meeting tuesday", session="m:a") == ["main:one", "main:two"]
    assert await found(store, "meeting tuesday", session="m:b") == ["main:two", "main:one"]


async def test_the_asking_agents_memory_ranks_first(store: Store) -> None:
    await remember(store, "deploy", "deploy with make release", namespace="ops", agent="ops")
    await remember(store, "deploy", "deploy with make release", namespace="dev", agent="dev")

    assert await found(store, "deploy release", session="x", agent="ops") == [
        "ops:deploy",
        "dev:deploy",
    ]
    assert await found(store, "deploy release", session="x", agent="dev") == [
        "dev:deploy",
        "ops:deploy",
    ]


async def test_a_tag_filter_keeps_only_memories_with_one_of_the_tags(store: Store) -> None:
    await remember(store, "colour", "likes blue", tags=("prefs",))
    await remember(store, "sky", "the sky is blue", tags=("facts", "weather"))
    await remember(store, "sea", "the sea is blue")

    assert await found(store, "blue", tags=("weather",)) == ["main:sky"]
    assert sorted(await found(store, "blue", tags=("prefs", "facts"))) == [
        "main:colour",
        "main:sky",
    ]


@pytest.mark.parametrize("query", ["", "   ", "?!", "..."])
async def test_a_query_without_words_finds_nothing(store: Store, query: str) -> None:
    await remember(store, "colour", "blue")

    assert await found(store, query) == []


@pytest.mark.parametrize(
    "query",
    [
        '"colour',
        'colour"',
        "colour*",
        "*colour",
        "NEAR(colour blue)",
        "colour NEAR blue",
        "(colour",
        "colour)",
        "((colour",
        "colour AND",
        "AND colour",
        "colour OR",
        "NOT colour",
        "colour NOT",
        "-colour",
        "colour -blue",
        "text:colour",
        "colour:",
        "^colour",
        "{key text}: colour",
        "colour + blue",
    ],
)
async def test_fts_syntax_in_a_query_is_searched_for_as_words_and_never_raises(
    store: Store, query: str
) -> None:
    await remember(store, "colour", "The user's favourite colour is blue")

    assert await found(store, query) == ["main:colour"]


@pytest.mark.parametrize("query", ['"', "*", "()", ")(", ":", "-", "NEAR", "AND OR NOT"])
async def test_a_query_of_fts_syntax_alone_never_raises(store: Store, query: str) -> None:
    await remember(store, "colour", "The user's favourite colour is blue")

    assert await found(store, query) == []


async def test_words_of_the_syntax_are_found_in_memories_that_hold_them(
    store: Store,
) -> None:
    await remember(store, "gate", "wire the NAND and NOT gates near the door")

    assert await found(store, "NOT near") == ["main:gate"]


async def test_a_word_in_very_many_memories_is_left_out_while_rarer_words_remain(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("clawbot.store.memories.FREQUENT", 3)
    for number in range(5):
        await remember(store, f"note-{number}", f"project note {number}")
    await remember(store, "dentist", "dentist on friday")

    assert await found(store, "project dentist") == ["main:dentist"]
    assert len(await found(store, "project")) == 5  # alone, it is still searched


async def test_when_every_word_is_frequent_the_newest_memories_holding_it_are_ranked(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("clawbot.store.memories.FREQUENT", 2)
    monkeypatch.setattr("clawbot.store.memories.NEWEST", 3)
    for number in range(6):
        await remember(store, f"note-{number}", f"project note {number}")

    assert sorted(await found(store, "project")) == ["main:note-3", "main:note-4", "main:note-5"]


async def test_a_search_in_no_namespace_finds_nothing(store: Store) -> None:
    await remember(store, "colour", "blue")

    assert await found(store, "blue", namespaces=()) == []
