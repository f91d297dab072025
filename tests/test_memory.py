"""Memory as agents use it: the memory tools (scoped per agent, policy-filtered), the
``[Context: memory]`` recall that reaches the model request and never the transcript, within
the agent's budgets, and ``/memory`` in the chat."""

from __future__ import annotations

import pytest

from clawbot.agents.profiles import ContextPolicy
from clawbot.app import Clawbot
from clawbot.errors import StoreError
from clawbot.memory.recall import MEMORY_BLOCK
from clawbot.policies import ToolPolicy
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .conftest import Chat, add_agent, parent_key


async def recall_on(bot: Clawbot, **policy: object) -> None:
    """Turn memory recall on for ``main``, with these context policy fields."""
    main = bot.agents.get("main")
    context = ContextPolicy(memory_recall=True, **policy)  # type: ignore[arg-type]
    await bot.agents.update(main.model_copy(update={"context": context}))


async def remember(
    bot: Clawbot,
    key: str,
    text: str,
    *,
    namespace: str = "main",
    session: str = "elsewhere:1",
    tags: tuple[str, ...] = (),
) -> None:
    await bot.store.memories.put(
        namespace=namespace,
        key=key,
        text=text,
        tags=tags,
        session_key=session,
        agent_id=namespace,
    )


# the tools ---------------------------------------------------------------------------


async def test_a_memory_stored_in_one_conversation_is_found_from_another(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(
        call("memory_store", key="colour", text="Favourite colour: blue", tags=["Prefs"]),
        "Noted.",
        call("memory_search", query="what colour do I like?"),
        "Blue.",
    )

    await chat.say("remember that I like blue")
    await Chat(bot, channel, chat_id="chat2").say("which colour do I like?")

    assert scripted.requests[1].tool_results == ["Stored main:colour (22 characters)."]
    assert scripted.requests[3].tool_results == ["- main:colour [prefs]: Favourite colour: blue"]
    memory = await bot.store.memories.get("main", "colour")
    assert memory is not None
    assert (memory.session_key, memory.agent_id) == (parent_key(channel), "main")


async def test_storing_under_a_key_again_updates_it(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await remember(bot, "colour", "blue")
    scripted.add(call("memory_store", key="colour", text="green"), "ok")

    await chat.say("I changed my mind: green")

    assert scripted.requests[1].tool_results == ["Updated main:colour (5 characters)."]
    memory = await bot.store.memories.get("main", "colour")
    assert memory is not None and memory.text == "green"


async def test_a_memory_over_the_size_cap_is_refused_with_a_clear_error(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("memory_store", key="essay", text="x" * 5000), "ok")

    await chat.say("remember this essay")

    result = scripted.requests[1].tool_results[0]
    assert result.startswith("error: the memory is 5,000 characters, over the limit of 4,000")
    assert "CLAWBOT_MEMORY_MAX_CHARS" in result
    assert await bot.store.memories.count() == 0


async def test_an_invalid_key_an_empty_text_and_an_empty_query_are_refused(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(
        [
            call("memory_store", key="a:b", text="t"),
            call("memory_store", key="k", text="  "),
            call("memory_search", query=" "),
        ],
        "ok",
    )

    await chat.say("try")

    results = scripted.requests[1].tool_results
    assert results[0].startswith("error: the memory key 'a:b' is not valid")
    assert results[1].startswith("error: the memory text is empty")
    assert results[2].startswith("error: the query is empty")
    assert await bot.store.memories.count() == 0


async def test_an_agent_forgets_its_own_memory_and_never_another_agents(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await remember(bot, "colour", "blue")
    await remember(bot, "colour", "red", namespace="scout")
    scripted.add(
        [call("memory_forget", key="scout:colour"), call("memory_forget", key="colour")],
        "ok",
    )

    await chat.say("forget the colour")

    refused, forgot = scripted.requests[1].tool_results
    assert refused.startswith("error: scout:colour is another agent's memory")
    assert forgot == "Forgot main:colour."
    assert await bot.store.memories.get("main", "colour") is None
    assert await bot.store.memories.get("scout", "colour") is not None


async def test_an_agent_reads_another_agents_memories_only_when_its_policy_lists_it(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await remember(bot, "colour", "the scout saw a red door", namespace="scout")
    scripted.add(
        [call("memory_search", query="red door"), call("memory_get", key="scout:colour")],
        "ok",
        [call("memory_search", query="red door"), call("memory_get", key="scout:colour")],
        "ok",
    )

    await chat.say("what did the scout see?")
    main = bot.agents.get("main")
    context = ContextPolicy(recall_from=("scout",))
    await bot.agents.update(main.model_copy(update={"context": context}))
    await chat.say("and now?")

    assert scripted.requests[1].tool_results[0] == "No memory matches 'red door'."
    assert (
        scripted.requests[1]
        .tool_results[1]
        .startswith("error: you do not recall from the memories of 'scout'")
    )
    found, read = scripted.requests[3].tool_results[-2:]
    assert found == "- scout:colour: the scout saw a red door"
    assert read.endswith("the scout saw a red door")


async def test_the_memory_tools_follow_the_agents_tool_policy(
    bot: Clawbot, chat: Chat, worker: ScriptedModel
) -> None:
    await add_agent(
        bot, "quiet", model=worker.model_string, tools=ToolPolicy(deny=("group:memory",))
    )
    await add_agent(bot, "keeper", model=worker.model_string, tools=ToolPolicy(allow=("memory_*",)))

    await chat.say("/agent quiet")
    await chat.say("hello")
    await chat.say("/agent keeper")
    await chat.say("hello")

    assert not any(name.startswith("memory_") for name in worker.requests[0].tool_names)
    assert sorted(worker.requests[1].tool_names) == [
        "memory_forget",
        "memory_get",
        "memory_search",
        "memory_store",
    ]


# recall ------------------------------------------------------------------------------


async def test_recall_reaches_the_model_request_and_never_the_transcript(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await recall_on(bot)
    await remember(bot, "colour", "The user's favourite colour is blue", tags=("prefs",))
    await remember(bot, "pet", "The user has a cat called Miso")

    await chat.say("what is my favourite colour?")

    system = scripted.requests[0].system
    assert MEMORY_BLOCK in system
    assert "- main:colour [prefs]: The user's favourite colour is blue" in system
    assert "Miso" not in system
    stored = await bot.store.transcripts.load(parent_key(channel), 0)
    assert [e.text for e in stored] == ["what is my favourite colour?", "ok"]
    assert all("favourite colour is blue" not in str(e.model_dump()) for e in stored)


async def test_recall_is_for_its_own_turn_only(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await recall_on(bot)
    await remember(bot, "colour", "The user's favourite colour is blue")

    await chat.say("what is my favourite colour?")
    await chat.say("thanks!")

    assert MEMORY_BLOCK in scripted.requests[0].system
    assert MEMORY_BLOCK not in scripted.requests[1].system


async def test_without_memory_recall_in_the_policy_there_is_no_block(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await remember(bot, "colour", "The user's favourite colour is blue")

    await chat.say("what is my favourite colour?")

    assert MEMORY_BLOCK not in scripted.requests[0].system


async def test_recall_keeps_to_the_item_budget(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await recall_on(bot, recall_items=3)
    for number in range(8):
        await remember(bot, f"trip-{number}", f"trip number {number} went to Lisbon")

    await chat.say("tell me about Lisbon")

    assert scripted.requests[0].system.count("\n- main:trip-") == 3


async def test_recall_keeps_to_the_character_budget(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await recall_on(bot, recall_chars=300)
    for number in range(5):
        await remember(bot, f"note-{number}", f"Lisbon {number} " + "words " * 40)

    await chat.say("tell me about Lisbon")

    lines = [
        line.partition(": ")[2]
        for line in scripted.requests[0].system.splitlines()
        if line.startswith("- main:note-")
    ]
    assert 1 < len(lines) < 5
    assert sum(len(text) for text in lines) <= 300


async def test_recall_keeps_to_the_policys_tags_and_namespaces(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await recall_on(bot, recall_tags=("travel",), recall_from=("scout",))
    await remember(bot, "lisbon", "Lisbon trip in May", tags=("travel",))
    await remember(bot, "rent", "Lisbon flat rent is due", tags=("money",))
    await remember(bot, "tip", "Lisbon: take tram 28", namespace="scout", tags=("travel",))
    await remember(bot, "tram", "Lisbon trams are yellow", namespace="other", tags=("travel",))

    await chat.say("plans for Lisbon?")

    system = scripted.requests[0].system
    assert "main:lisbon" in system and "scout:tip" in system
    assert "main:rent" not in system and "other:tram" not in system


# /memory -------------------------------------------------------------------------------


async def test_the_memory_command_shows_what_was_remembered_in_this_conversation(
    bot: Clawbot, chat: Chat, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    await remember(bot, "other", "from another chat")
    scripted.add(call("memory_store", key="colour", text="likes blue", tags=["prefs"]), "Noted.")
    await chat.say("I like blue")

    await chat.say("/memory")

    assert channel.texts[-1] == (
        "main remembers from this conversation (1, newest first):\n"
        "• main:colour [prefs]: likes blue"
    )
    assert len(scripted.requests) == 2  # the command made no model call


async def test_the_memory_command_with_words_searches_what_the_agent_recalls_from(
    bot: Clawbot, chat: Chat, channel: MemoryChannel
) -> None:
    await remember(bot, "colour", "likes blue")
    await remember(bot, "colour", "scout likes red", namespace="scout")

    await chat.say("/memory likes")
    await chat.say("/memory")

    assert channel.texts[0] == "main remembers (1 best matches):\n• main:colour: likes blue"
    assert channel.texts[1].startswith("Nothing is remembered from this conversation yet.")


async def test_a_secret_in_a_memory_is_masked_before_it_is_stored(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    key = "sk-" + "a1b2c3d4" * 4
    scripted.add(call("memory_store", key="api", text=f"the user's key is {key}"), "ok")

    await chat.say(f"remember my key {key}")

    memory = await bot.store.memories.get("main", "api")
    assert memory is not None
    assert key not in memory.text and "[redacted]" in memory.text


async def test_a_failing_recall_costs_the_turn_its_recall_not_the_turn(
    bot: Clawbot,
    chat: Chat,
    channel: MemoryChannel,
    scripted: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await recall_on(bot)
    await remember(bot, "colour", "The user's favourite colour is blue")

    async def broken(query: object) -> list[object]:
        raise StoreError("database error on clawbot.db: disk I/O error")

    monkeypatch.setattr(bot.store.memories, "search", broken)
    await chat.say("what is my favourite colour?")

    assert channel.texts == ["ok"]
    assert MEMORY_BLOCK not in scripted.requests[0].system
    assert "no memory recall this turn: database error" in caplog.text


async def test_recall_from_star_reads_every_agents_memories(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    await recall_on(bot, recall_from=("*",))
    await remember(bot, "door", "the scout saw a red door", namespace="scout")
    await remember(bot, "door", "the coder painted a red door", namespace="coder")

    await chat.say("who saw the red door?")

    system = scripted.requests[0].system
    assert "scout:door" in system and "coder:door" in system
