"""What a person sees of a conversation's subagents: ``/subagents`` (list, stop, log) and
``/stop`` stopping the subagents' turns with the conversation's own."""

from __future__ import annotations

import asyncio
import re

import pytest

from clawbot.app import Clawbot
from clawbot.commands.subagents import LOG_MESSAGES, NO_CHILDREN, USAGE
from clawbot.messages import (
    INTERNAL_CHANNEL,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    TranscriptEntry,
)
from clawbot.routing.sessions import Session, child_key
from clawbot.scheduling.records import TurnHandle
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, ScriptedUsage

from .conftest import Chat

PARENT = "memory:chat1"


class Hanging:
    """A model that never answers the texts it is told to hang on (until the turn is
    cancelled) and answers everything else at once."""

    def __init__(self, scripted: ScriptedModel, *texts: str) -> None:
        self.entered = {text: asyncio.Event() for text in texts}
        scripted.function = self.answer

    async def answer(self, request: ModelRequest) -> str:
        text = request.last_user_text
        if text in self.entered:
            self.entered[text].set()
            await asyncio.Event().wait()
        return f"Did: {text}"

    async def wait(self) -> None:
        for event in self.entered.values():
            await event.wait()


@pytest.fixture
async def parent(bot: Clawbot) -> Session:
    return await bot.store.sessions.create(
        Session(key=PARENT, channel="memory", chat_id="chat1", agent_id="main")
    )


async def spawn(
    bot: Clawbot, owner: Session, child_id: str, agent_id: str = "researcher", **meta: object
) -> Session:
    """A child session, made directly in the store (as the spawn tool would make it)."""
    key = child_key(owner.key, child_id)
    return await bot.store.sessions.create(
        Session(
            key=key,
            channel=INTERNAL_CHANNEL,
            chat_id=key,
            agent_id=agent_id,
            deliver=False,
            owner_key=owner.key,
            meta=dict(meta),
        )
    )


async def give(bot: Clawbot, child: Session, task: str) -> TurnHandle:
    """Start a turn of ``child`` on ``task``, in the subagent lane."""
    entry = TranscriptEntry(role="user", content=(TextBlock(text=task),))
    handle = await bot.scheduler.submit(child, entry, lane="subagent")
    assert handle is not None
    return handle


# /subagents --------------------------------------------------------------------------------


async def test_subagents_without_children_says_so(chat: Chat, parent: Session) -> None:
    result = await chat.say("/subagents")

    assert result.reply == NO_CHILDREN


async def test_subagents_lists_each_child_with_agent_label_status_age_and_tokens(
    bot: Clawbot, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    scripted.add("Found three papers.")
    done = await spawn(bot, parent, "r1", label="find papers", tokens=1234)
    await (await give(bot, done, "find papers")).outcome()
    await spawn(bot, parent, "w2", agent_id="writer")

    result = await chat.say("/subagents")

    lines = (result.reply or "").splitlines()
    assert lines[0] == "Subagents (2) — id · agent · label · status · age · tokens:"
    assert re.fullmatch(r"• r1 · researcher · find papers · done · \d+s · 1,234", lines[1])
    assert lines[2] == "• w2 · writer · - · idle · - · -"


async def test_subagents_lists_only_this_conversations_children(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    other = await bot.store.sessions.create(
        Session(key="memory:chat2", channel="memory", chat_id="chat2", agent_id="main")
    )
    await spawn(bot, other, "elsewhere")
    mine = await spawn(bot, parent, "r1")
    await spawn(bot, mine, "grandchild")

    result = await chat.say("/subagents")

    assert [line.split(" · ")[0] for line in (result.reply or "").splitlines()[1:-1]] == ["• r1"]


async def test_subagents_with_an_unknown_word_shows_the_usage(chat: Chat, parent: Session) -> None:
    result = await chat.say("/subagents frobnicate")

    assert result.reply == USAGE


async def test_an_unknown_id_gets_one_line_listing_the_valid_ids(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    await spawn(bot, parent, "r1")
    await spawn(bot, parent, "w2")

    result = await chat.say("/subagents log r9")

    assert result.reply == "No subagent has the id 'r9'; the ids are: r1, w2."


async def test_stop_or_log_without_an_id_asks_for_one_of_the_valid_ids(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    await spawn(bot, parent, "r1")

    result = await chat.say("/subagents stop")

    assert result.reply == "Name a subagent: r1."


async def test_subagents_log_shows_the_childs_last_messages_tools_included(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    child = await spawn(bot, parent, "r1")
    await bot.store.transcripts.append(
        child,
        [
            TranscriptEntry(role="user", content=(TextBlock(text="count the files"),)),
            TranscriptEntry(
                role="assistant",
                content=(ToolCallBlock(id="c1", name="list_dir", arguments={"path": "."}),),
            ),
            TranscriptEntry(
                role="tool",
                content=(ToolResultBlock(tool_call_id="c1", name="list_dir", content="a\nb"),),
            ),
            TranscriptEntry(role="assistant", content=(TextBlock(text="There are 2."),)),
        ],
    )

    result = await chat.say("/subagents log r1")

    assert result.reply == (
        "Last 4 message(s) of r1 (researcher):\n"
        "user: count the files\n"
        'assistant: → list_dir({"path": "."})\n'
        "tool: ← list_dir result: a b\n"
        "assistant: There are 2."
    )


async def test_subagents_log_is_bounded_to_the_last_messages_each_cut_short(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    child = await spawn(bot, parent, "r1")
    await bot.store.transcripts.append(
        child,
        [
            TranscriptEntry(role="assistant", content=(TextBlock(text=f"{n} " + "x" * 5000),))
            for n in range(3 * LOG_MESSAGES)
        ],
    )

    result = await chat.say("/subagents log r1")

    lines = (result.reply or "").splitlines()
    assert lines[0] == f"Last {LOG_MESSAGES} message(s) of r1 (researcher):"
    assert lines[1].startswith(f"assistant: {2 * LOG_MESSAGES} xxx")
    assert len(lines) == LOG_MESSAGES + 1
    assert max(len(line) for line in lines) <= 300


async def test_subagents_log_of_a_child_without_messages_says_so(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    await spawn(bot, parent, "r1")

    result = await chat.say("/subagents log r1")

    assert result.reply == "r1 has no messages yet."


async def test_subagents_stop_cancels_that_childs_running_turn_only(
    bot: Clawbot, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    model = Hanging(scripted, "dig", "write")
    digging = await give(bot, await spawn(bot, parent, "r1"), "dig")
    writing = await give(bot, await spawn(bot, parent, "w2", agent_id="writer"), "write")
    await model.wait()

    result = await chat.say("/subagents stop r1")

    assert result.reply == "Stopped r1's running turn."
    assert (await digging.outcome()).status == "cancelled"
    assert not writing.future.done()
    await chat.say("/subagents stop w2")


async def test_subagents_stop_of_an_idle_child_says_it_was_not_running(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    await spawn(bot, parent, "r1")

    result = await chat.say("/subagents stop r1")

    assert result.reply == "r1 was not running."


async def test_subagents_stop_all_cancels_every_running_child_and_counts_them(
    bot: Clawbot, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    model = Hanging(scripted, "dig", "write")
    turns = [
        await give(bot, await spawn(bot, parent, "r1"), "dig"),
        await give(bot, await spawn(bot, parent, "w2", agent_id="writer"), "write"),
    ]
    await spawn(bot, parent, "idle")
    await model.wait()

    result = await chat.say("/subagents stop all")

    assert result.reply == "Stopped 2 running subagent turn(s)."
    assert [(await turn.outcome()).status for turn in turns] == ["cancelled", "cancelled"]


# /stop cascades ----------------------------------------------------------------------------


async def test_stop_also_stops_the_running_children_and_grandchildren_and_counts_them(
    bot: Clawbot, channel: MemoryChannel, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    model = Hanging(scripted, "plan", "dig", "read")
    planning = await bot.router.receive(channel.message("plan"))
    child = await spawn(bot, parent, "r1")
    digging = await give(bot, child, "dig")
    reading = await give(bot, await spawn(bot, child, "w1", agent_id="writer"), "read")
    await model.wait()

    result = await chat.say("/stop")

    assert result.reply == "Stopped the running turn and 2 subagent turn(s)."
    assert (await planning.wait()).kind == "cancelled"
    assert [(await t.outcome()).status for t in (digging, reading)] == ["cancelled", "cancelled"]


async def test_stop_with_only_a_child_running_stops_it_and_says_so(
    bot: Clawbot, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    model = Hanging(scripted, "dig")
    digging = await give(bot, await spawn(bot, parent, "r1"), "dig")
    await model.wait()

    result = await chat.say("/stop")

    assert result.reply == "Nothing was running here; stopped 1 subagent turn(s)."
    assert (await digging.outcome()).status == "cancelled"


async def test_stop_leaves_another_conversations_subagents_running(
    bot: Clawbot, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    other = await bot.store.sessions.create(
        Session(key="memory:chat2", channel="memory", chat_id="chat2", agent_id="main")
    )
    model = Hanging(scripted, "dig")
    digging = await give(bot, await spawn(bot, other, "r1"), "dig")
    await model.wait()

    result = await chat.say("/stop")

    assert result.reply == "Nothing was running."
    assert not digging.future.done()
    await bot.scheduler.stop(digging.session_key)


async def test_the_label_is_also_read_from_the_spawn_record_and_bad_meta_is_shown_as_unknown(
    bot: Clawbot, chat: Chat, parent: Session
) -> None:
    await spawn(bot, parent, "r1", subagent={"label": "summarize", "depth": 1})
    await spawn(bot, parent, "r2", label=["not", "text"], tokens="many", subagent="garbled")

    result = await chat.say("/subagents")

    assert (result.reply or "").splitlines()[1:3] == [
        "• r1 · researcher · summarize · idle · - · -",
        "• r2 · researcher · - · idle · - · -",
    ]


async def test_subagents_shows_each_childs_tokens_and_cost_over_all_its_turns(
    bot: Clawbot, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=1000, completion_tokens=200, cost_usd=0.0006)
    scripted.add("First answer.", "Second answer.")
    child = await spawn(bot, parent, "r1")
    await (await give(bot, child, "first")).outcome()
    await (await give(bot, child, "second")).outcome()
    scripted.usage = None

    result = await chat.say("/subagents")

    (line,) = [line for line in (result.reply or "").splitlines() if line.startswith("• r1 ")]
    assert line.endswith(" · 2,400 ($0.0012)")


async def test_subagents_shows_tokens_without_a_cost_for_a_model_without_a_price(
    bot: Clawbot, chat: Chat, parent: Session, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=1000, completion_tokens=200)
    scripted.add("An answer.")
    child = await spawn(bot, parent, "r1")
    await (await give(bot, child, "first")).outcome()
    scripted.usage = None

    result = await chat.say("/subagents")

    (line,) = [line for line in (result.reply or "").splitlines() if line.startswith("• r1 ")]
    assert line.endswith(" · 1,200")
