"""Replies shown while they are written: a preview message edited through the chat's pacer,
left at the end as exactly the reply, cut in parts as any reply, each part once. The model
streams through the real litellm path at the pace a test sets; the chat keeps a platform's
rules (no-op and over-long edits refused, calls too close together answered with a 429);
time is virtual."""

from __future__ import annotations

import asyncio

import pytest

from clawbot.app import Clawbot
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.live_reply import STOPPED_MARK, SUPERSEDED
from clawbot.channels.rendering import render_parts
from clawbot.clock import ManualClock
from clawbot.messages import INTERNAL_CHANNEL, OutboundMessage
from clawbot.settings import Settings
from clawbot.testing import (
    ChatRules,
    MemoryChannel,
    ScriptedModel,
    StreamPace,
    VirtualClock,
    answer,
    call,
)
from clawbot.testing.streams import text_chunks

LIMITS = ChannelLimits(max_message_chars=500, message_interval=1.0, edit_interval=3.0)
REPLY = "Streaming replies show up while the model is still writing them, then stay as written."
FIRST_WORDS = "Streaming replies show"
"""What the chat shows of REPLY once three chunks of 8 characters came (a word being written
is held back)."""


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def live(bot: Clawbot, clock: VirtualClock) -> MemoryChannel:
    """A chat that shows replies while they are written, with a platform's per-chat rate."""
    return connect_live(bot, clock)


def connect_live(
    bot: Clawbot, clock: VirtualClock, limits: ChannelLimits = LIMITS, **rules: float
) -> MemoryChannel:
    enforced = {
        "message_interval": limits.message_interval,
        "edit_interval": limits.edit_interval,
        **rules,
    }
    channel = MemoryChannel("live", live=True, limits=limits, rules=ChatRules(clock, **enforced))  # type: ignore[arg-type]
    bot.connect(channel)
    bot.outbox.clock = clock
    return channel


@pytest.fixture
def pace(scripted: ScriptedModel) -> StreamPace:
    scripted.pace = StreamPace()
    return scripted.pace


def sent_texts(channel: MemoryChannel) -> list[str]:
    """Every text the chat was given, in messages and edits."""
    return [m.text for m in channel.sent] + [e.text for e in channel.edits]


async def test_a_reply_is_shown_as_it_is_written_and_ends_as_written(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel, pace: StreamPace
) -> None:
    scripted.add(REPLY)
    turn = asyncio.create_task(bot.router.handle(live.message("hi")))

    pace.allow(3)
    await live.shows(lambda chat: chat.chat() == [FIRST_WORDS])
    shown_while_writing, written = live.chat(), pace.chunks
    pace.release()
    await turn

    assert (shown_while_writing, written) == ([FIRST_WORDS], 3)  # the rest not yet written
    assert live.chat() == [REPLY]
    assert len(live.sent) == 1
    assert scripted.requests[0].streamed


async def test_a_reply_written_before_its_first_preview_is_due_is_sent_once_with_no_preview(
    bot: Clawbot, clock: VirtualClock, scripted: ScriptedModel
) -> None:
    live = connect_live(bot, clock, ChannelLimits(max_message_chars=500))  # no rate to wait on
    scripted.chunk_size = 4  # written in many chunks, each shown to the live reply
    scripted.add(REPLY)
    clock.pause()  # the whole reply is written before FIRST_PREVIEW_HOLD has passed

    await bot.router.handle(live.message("hi"))

    assert [m.text for m in live.sent] == [REPLY]
    assert live.edits == []


async def test_texts_written_while_the_chat_is_busy_are_dropped_not_queued(
    bot: Clawbot, clock: VirtualClock, scripted: ScriptedModel
) -> None:
    class SlowChat(MemoryChannel):
        """A platform that takes its time over the first message."""

        def __init__(self) -> None:
            super().__init__("live", live=True, limits=LIMITS, rules=ChatRules(clock, 1.0, 3.0))
            self.taking = asyncio.Event()
            self.took = asyncio.Event()

        async def send(self, message: OutboundMessage) -> list:  # type: ignore[type-arg]
            self.taking.set()
            await self.took.wait()
            return await super().send(message)

    slow = SlowChat()
    bot.connect(slow)
    bot.outbox.clock = clock
    scripted.chunk_size = 4
    scripted.add(REPLY)
    turn = asyncio.create_task(bot.router.handle(slow.message("hi")))

    await slow.taking.wait()  # the first preview is on its way; the model writes on
    await until_done(bot)
    slow.took.set()
    await turn

    # the first preview, then straight to the newest text (the whole of it held back but
    # its last word, if the chat was free before the turn ended), none in between
    newest = REPLY.rsplit(" ", 1)[0]
    assert len(slow.sent) == 1
    assert [e.text for e in slow.edits] in ([REPLY], [newest, REPLY])
    assert slow.chat() == [REPLY]


async def until_done(bot: Clawbot) -> None:
    """Until the model's answer was read whole (the turn waits for the chat only)."""
    session = "live:chat1"
    for _ in range(100_000):
        transcript = await bot.store.transcripts.load(session, 0)
        if any(e.role == "assistant" for e in transcript):
            return
        await asyncio.sleep(0)
    raise AssertionError("the model never finished")


async def test_an_edit_that_would_not_change_the_message_is_never_sent(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel, pace: StreamPace
) -> None:
    # the last chunk adds only a space: the preview already shows the whole reply
    scripted.chunk_size = 5
    scripted.add("One two three four ")
    turn = asyncio.create_task(bot.router.handle(live.message("count")))
    pace.allow(4)
    await live.shows(lambda chat: chat.chat() == ["One two three four"])

    pace.release()
    await turn

    assert live.chat() == ["One two three four"]
    assert len(live.sent) == 1  # (the chat refuses an edit that changes nothing)


async def test_a_10000_character_reply_under_a_strict_rate_limit_ends_as_its_text_once(
    bot: Clawbot, clock: VirtualClock, scripted: ScriptedModel
) -> None:
    # the platform is stricter than it says: calls closer than 1.5 s meet a 429
    live = connect_live(bot, clock, message_interval=1.5, edit_interval=4.0)
    text = "\n\n".join(
        f"Section {n}. " + " ".join(f"word{n}x{m}" for m in range(60)) for n in range(20)
    )[:10_000].rstrip()
    assert len(text) >= 9_900
    scripted.chunk_size = 40
    scripted.add(text)

    await bot.router.handle(live.message("write a lot"))

    parts = [part.source for part in render_parts(text, LIMITS)]
    assert live.chat() == parts
    assert len(live.sent) == len(parts)  # each part posted once
    assert live.edits  # shown while written
    assert live.rules is not None and live.rules.refused > 0  # and the 429s waited out


async def test_an_edit_refused_for_good_ends_with_the_reply_sent_once_as_a_new_message(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel, pace: StreamPace
) -> None:
    scripted.add(REPLY)
    turn = asyncio.create_task(bot.router.handle(live.message("hi")))
    pace.allow(3)
    await live.shows(lambda chat: chat.chat() == [FIRST_WORDS])

    live.fail_edits = True  # say, the message is too old to edit
    pace.release()
    await turn

    assert live.chat() == [REPLY]  # the preview that could not be edited taken back
    assert [m.text for m in live.sent].count(REPLY) == 1


async def test_a_preview_neither_edited_nor_deleted_stays_beside_the_reply_sent_once(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel, pace: StreamPace
) -> None:
    scripted.add(REPLY)
    turn = asyncio.create_task(bot.router.handle(live.message("hi")))
    pace.allow(3)
    await live.shows(lambda chat: chat.chat() == [FIRST_WORDS])

    live.fail_edits = live.fail_deletes = True
    pace.release()
    await turn

    assert live.chat() == [FIRST_WORDS, REPLY]
    assert [m.text for m in live.sent].count(REPLY) == 1


async def test_stop_mid_stream_leaves_the_preview_marked_as_stopped(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel, pace: StreamPace
) -> None:
    scripted.add(REPLY)
    turn = asyncio.create_task(bot.router.handle(live.message("hi")))
    pace.allow(3)
    await live.shows(lambda chat: chat.chat() == [FIRST_WORDS])

    await bot.router.handle(live.message("/stop"))
    await turn

    assert live.chat()[0] == FIRST_WORDS + STOPPED_MARK
    assert not any("still writing" in text for text in sent_texts(live))


async def test_a_steer_mid_stream_leaves_the_preview_marked_and_the_next_turn_answers(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel, pace: StreamPace
) -> None:
    scripted.add(answer("Let me read the notes first.", call("file_read", path="notes.md")))
    scripted.add("Here is the answer to the newer message.")
    first = asyncio.create_task(bot.router.handle(live.message("read my notes")))
    pace.allow(3)
    await live.shows(lambda chat: chat.chat() == ["Let me read the notes"])

    second = asyncio.create_task(bot.router.handle(live.message("no, answer this instead")))
    await asyncio.sleep(0)
    pace.release()
    await asyncio.gather(first, second)

    # (then the stopped task is taken up again from the backlog, as after any steer)
    assert live.chat()[:2] == [
        "Let me read the notes" + STOPPED_MARK,
        "Here is the answer to the newer message.",
    ]


async def test_with_streaming_off_a_reply_is_sent_once_as_before(
    settings: Settings, scripted: ScriptedModel, clock: VirtualClock
) -> None:
    scripted.add(REPLY)
    off = settings.model_copy(update={"streaming_channels": {"live": False}})
    async with await Clawbot.open(off) as bot:
        live = connect_live(bot, clock)
        await bot.router.handle(live.message("hi"))

    assert [m.text for m in live.sent] == [REPLY]
    assert live.edits == []
    assert not scripted.requests[0].streamed


async def test_a_round_that_ends_in_tool_calls_is_shown_then_replaced_by_the_reply(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel
) -> None:
    (bot.workspace.root / "notes.md").write_text("hi")
    scripted.add(
        answer(
            "Let me look at your notes before I answer that.", call("file_read", path="notes.md")
        ),
        "Your notes say hi.",
    )

    await bot.router.handle(live.message("what do my notes say?"))

    assert any(text.startswith("Let me look") for text in sent_texts(live))
    assert live.chat() == ["Your notes say hi."]


THOUGHTS = "\n\n".join(f"Thought {n}: " + "pondering " * 40 for n in range(3))
"""A model round's text that fills three messages."""


def long_thoughts_then(reply: str, bot: Clawbot, scripted: ScriptedModel) -> int:
    """A round whose text fills several messages, ending in a tool call, then ``reply``:
    how many messages the first round's preview takes."""
    (bot.workspace.root / "notes.md").write_text("hi")
    scripted.add(answer(THOUGHTS, call("file_read", path="notes.md")), reply)
    return len(render_parts(THOUGHTS, LIMITS))


async def test_messages_an_earlier_longer_round_needed_are_deleted_at_the_end(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel
) -> None:
    previews = long_thoughts_then("Short answer.", bot, scripted)
    assert previews > 1

    await bot.router.handle(live.message("think"))

    assert live.chat() == ["Short answer."]
    assert len(live.deletions) == previews - 1


async def test_a_message_the_platform_will_not_delete_is_left_as_superseded(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel
) -> None:
    live.fail_deletes = True
    long_thoughts_then("Short answer.", bot, scripted)

    await bot.router.handle(live.message("think"))

    assert live.chat()[0] == "Short answer."
    assert set(live.chat()[1:]) == {SUPERSEDED}


async def test_a_turn_stopped_after_a_shorter_round_deletes_the_longer_rounds_messages(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel, pace: StreamPace
) -> None:
    previews = long_thoughts_then("Short answer that is never finished.", bot, scripted)
    turn = asyncio.create_task(bot.router.handle(live.message("think")))
    pace.allow(len(text_chunks(THOUGHTS, scripted.chunk_size)))
    await live.shows(lambda chat: len(chat.chat()) == previews)  # the first round, in full
    pace.allow(2 + 2)  # its tool call, and two chunks of the answer
    await live.shows(lambda chat: chat.chat()[0].startswith("Short answer"))

    await bot.router.handle(live.message("/stop"))
    await turn

    assert live.chat() == ["Short answer" + STOPPED_MARK, "Stopped the running turn."]


async def test_drafts_show_the_reply_in_a_private_chat_and_it_is_then_sent_as_a_message(
    bot: Clawbot, clock: VirtualClock, scripted: ScriptedModel
) -> None:
    drafting = ChannelLimits(max_message_chars=500, message_interval=1.0, drafts=True)
    live = connect_live(bot, clock, drafting)
    scripted.add(REPLY)

    await bot.router.handle(live.message("hi"))

    assert live.drafts and all(REPLY.startswith(text) for _, _, text in live.drafts)
    assert live.edits == []
    assert live.chat() == [REPLY]


async def test_no_live_reply_is_made_for_an_internal_or_undelivered_session(
    bot: Clawbot, live: MemoryChannel
) -> None:
    template = OutboundMessage(channel="live", chat_id="chat1", text="")

    assert bot.outbox.live_reply(template, chat_type="dm") is not None
    assert (
        bot.outbox.live_reply(template.model_copy(update={"deliver": False}), chat_type="dm")
        is None
    )
    internal = template.model_copy(update={"channel": INTERNAL_CHANNEL})
    assert bot.outbox.live_reply(internal, chat_type="dm") is None


async def test_a_preview_never_shows_a_credential_half_written(
    bot: Clawbot, live: MemoryChannel, scripted: ScriptedModel
) -> None:
    key = "sk-" + "a1b2c3d4" * 4
    scripted.chunk_size = 3
    scripted.add(f"The key you pasted is {key} and it should be rotated.")

    await bot.router.handle(live.message("what was my key?"))

    assert not any("sk-" in text for text in sent_texts(live))
    assert live.chat() == ["The key you pasted is [redacted] and it should be rotated."]


async def test_a_turn_killed_mid_stream_is_answered_once_at_restart_and_its_preview_not_resent(
    settings: Settings, clock: VirtualClock
) -> None:
    held, answering = ScriptedModel(name="held", pace=StreamPace()), ScriptedModel(name="fresh")
    held.add(REPLY)
    answering.add("The whole answer, from the restarted bot.")
    lease = ManualClock()
    with held.installed(), answering.installed():
        crashed = await Clawbot.open(
            settings.model_copy(update={"model": held.model_string}), clock=lease
        )
        live = connect_live(crashed, clock)
        await crashed.router.receive(live.message("hi"))
        assert held.pace is not None
        held.pace.allow(3)
        await live.shows(lambda chat: chat.chat() == [FIRST_WORDS])
        await crashed.store.flush()
        try:
            restarted_settings = settings.model_copy(update={"model": answering.model_string})
            async with await Clawbot.open(restarted_settings, clock=lease) as restarted:
                restarted.connect(live)
                restarted.outbox.clock = clock
                lease.advance(settings.job_lease + 1)
                await restarted.start()
                await restarted.scheduler.wait_idle()
                stored = await restarted.store.transcripts.load("live:chat1", 0)
                shown, posted = live.chat(), len(live.sent)
        finally:
            await crashed.scheduler.shutdown(timeout=0)
            await crashed.close()

    # the preview of the killed process stays as it was; the answer comes once, new
    assert shown == [FIRST_WORDS, "The whole answer, from the restarted bot."]
    assert posted == 2
    assert [e.text for e in stored if e.role == "assistant"] == [
        "The whole answer, from the restarted bot."
    ]


async def test_typing_shows_until_the_first_words_do(
    bot: Clawbot,
    clock: VirtualClock,
    scripted: ScriptedModel,
    pace: StreamPace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("clawbot.scheduling.delivery.TYPING_REFRESH_SECONDS", 0)
    live = connect_live(bot, clock, ChannelLimits(max_message_chars=500))  # no rate to wait on
    scripted.chunk_size = 2  # the rest of the reply takes many chunks after the first words
    scripted.add(REPLY)
    turn = asyncio.create_task(bot.router.handle(live.message("hi")))
    await live.shows(lambda chat: len(chat.typing) >= 3)  # typing while nothing shows

    pace.allow(12)
    await live.shows(lambda chat: chat.chat() != [])
    typed = len(live.typing)
    pace.release()
    await turn

    assert len(live.typing) <= typed + 1  # (one may have been on its way)
