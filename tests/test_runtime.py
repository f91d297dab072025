"""The agent turn: tool loop, bounds, failures, retries."""

from __future__ import annotations

from clawbot.app import Clawbot
from clawbot.messages import TranscriptEntry
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedFailure, ScriptedModel, call

from .conftest import Chat


async def test_a_plain_message_gets_the_models_answer(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.add("Hello there!")

    await chat.say("hi")

    assert channel.texts == ["Hello there!"]
    assert scripted.requests[0].last_user_text == "hi"


async def test_a_message_holding_a_lone_surrogate_is_answered_and_stored_with_a_replacement(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    # JSON may carry "\ud800" (a platform's update, a provider's reply); it has no UTF-8 form
    scripted.add("Got it \udfff.")

    await chat.say("half an emoji: \ud83d!")

    stored = await bot.store.transcripts.load("memory:chat1", 0)
    assert channel.texts == ["Got it \ufffd."]
    assert scripted.requests[0].last_user_text == "half an emoji: \ufffd!"
    assert [e.text for e in stored] == ["half an emoji: \ufffd!", "Got it \ufffd."]


async def test_a_scripted_model_told_not_to_record_keeps_no_requests_and_still_answers(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.record = False
    scripted.add("first", "second")

    await chat.say("one")
    await chat.say("two")

    assert channel.texts == ["first", "second"]
    assert scripted.requests == []


async def test_system_prompt_is_built_from_workspace_bootstrap_files(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "SOUL.md").write_text("Always answer in haiku.")
    (bot.workspace.root / "USER.md").unlink()

    await chat.say("hi")

    system = scripted.requests[0].system
    assert "Always answer in haiku." in system
    assert "About the user" not in system
    assert "## IDENTITY.md" in system


async def test_a_tool_calling_turn_with_two_rounds_reaches_a_final_answer(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    (bot.workspace.root / "notes.md").write_text("buy milk")
    scripted.add(call("list_dir"), call("file_read", path="notes.md"), "Your notes say: buy milk.")

    result = await chat.say("what do my notes say?")

    assert channel.texts == ["Your notes say: buy milk."]
    assert result.turn is not None and result.turn.rounds == 2
    assert "notes.md" in scripted.requests[1].tool_results[0]
    assert scripted.requests[2].tool_results[-1] == "buy milk"
    assert set(scripted.requests[0].tool_names) == {
        "file_read",
        "file_write",
        "file_edit",
        "list_dir",
        "send_file",
        "shell_exec",
        "web_fetch",
        "skill_read",
        "models_list",
        "agents_list",
        "session_set_model",
        "session_set_agent",
        "agent_create",
        "agent_update",
        "delegate",
        "sessions_spawn",
        "sessions_send",
        "sessions_list",
        "sessions_history",
        "sessions_stop",
        "memory_store",
        "memory_search",
        "memory_get",
        "memory_forget",
        "schedule_create",
        "schedule_list",
        "schedule_cancel",
    }


async def test_tool_loop_stops_at_max_tool_rounds_and_asks_for_a_final_answer(
    settings: Settings, scripted: ScriptedModel
) -> None:
    settings = settings.model_copy(update={"max_tool_rounds": 3})
    counter = iter(range(100))
    scripted.function = lambda request: (
        "Stopped: I ran out of tool rounds."
        if not request.tools
        else call("list_dir", path=f"d{next(counter)}")
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        for name in ("d0", "d1", "d2"):
            (bot.workspace.root / name).mkdir()

        result = await bot.router.handle(channel.message("explore"))

    assert len(scripted.requests) == 4
    assert all(r.tools for r in scripted.requests[:3])
    assert scripted.requests[3].tools == []
    assert "used all tool rounds" in scripted.requests[3].messages[-1]["content"]
    assert channel.texts == ["Stopped: I ran out of tool rounds."]
    assert result.turn is not None and result.turn.rounds == 3


async def test_a_repeated_identical_call_is_not_executed_again_and_ends_the_loop(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    (bot.workspace.root / "a.txt").write_text("A")
    scripted.function = lambda request: (
        "Done looping." if not request.tools else call("file_read", path="a.txt")
    )

    await chat.say("read a.txt forever")

    results = scripted.requests[-1].tool_results
    assert results[0] == "A"
    assert all("already made this exact call" in r for r in results[1:])
    assert len(results) == 3
    assert scripted.requests[-1].tools == []
    assert channel.texts == ["Done looping."]


async def test_a_failing_tool_returns_an_error_result_and_the_turn_continues(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    scripted.add(call("file_read", path="missing.md"), "That file does not exist.")

    result = await chat.say("read missing.md")

    assert scripted.requests[1].tool_results[0].startswith("error: no such file: missing.md")
    assert channel.texts == ["That file does not exist."]
    assert result.turn is not None and result.turn.status == "done"


async def test_invalid_tool_arguments_come_back_as_an_error_result(
    chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(call("file_read", filename="x"), "ok")

    await chat.say("read")

    error = scripted.requests[1].tool_results[0]
    assert error.startswith("error: invalid arguments")
    assert "path" in error


async def test_provider_rate_limit_is_retried_then_answered(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel, bot: Clawbot
) -> None:
    scripted.add(ScriptedFailure("rate_limit"), ScriptedFailure("server_error"), "Back again.")

    result = await chat.say("hello?")

    assert len(scripted.requests) == 3
    assert channel.texts == ["Back again."]
    assert result.turn is not None
    job = await bot.store.jobs.get(result.turn.turn_id)
    assert job is not None and job.status == "done"


async def test_provider_failing_every_retry_gets_a_clear_reply_and_a_failed_turn(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel, bot: Clawbot
) -> None:
    scripted.function = lambda request: ScriptedFailure("timeout")

    result = await chat.say("hello?")

    assert len(scripted.requests) == bot.settings.provider_retries + 1
    assert len(channel.texts) == 1
    assert channel.texts[0].startswith("The model provider is unavailable")
    assert "did not answer in time" in channel.texts[0]
    assert result.turn is not None
    job = await bot.store.jobs.get(result.turn.turn_id)
    assert job is not None and job.status == "failed"
    stored = await bot.store.transcripts.load("memory:chat1", 0)
    assert [e.text for e in stored] == ["hello?"]


async def test_the_next_turn_after_a_failure_still_sees_the_unanswered_message(
    chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.add(ScriptedFailure("bad_request"), "Now I can answer.")

    await chat.say("first")
    await chat.say("second")

    users = [m["content"] for m in scripted.requests[-1].messages if m["role"] == "user"]
    assert users == ["first", "second"]


async def test_ephemeral_context_is_shown_to_the_model_but_never_stored(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    session = await bot.router.session_for(channel.message("x"))
    turn_id = await bot.runtime.accept(session, _entry("what did we decide?"))
    assert turn_id is not None

    await bot.runtime.run_turn(session, turn_id, ephemeral=["[Context: recall]\nWe chose blue."])

    assert "We chose blue." in str(scripted.requests[0].messages)
    stored = await bot.store.transcripts.load(session.key, session.epoch)
    assert "We chose blue." not in str([e.model_dump() for e in stored])


def _entry(text: str) -> TranscriptEntry:
    from clawbot.messages import TextBlock, TranscriptEntry

    return TranscriptEntry(role="user", content=(TextBlock(text=text),))
