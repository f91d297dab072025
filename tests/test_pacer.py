"""One pacer per chat: every call to a chat goes through it, within the platform's rate, and a
429 with ``retry_after`` is waited out. Time is virtual: no test waits."""

from __future__ import annotations

import asyncio

from clawbot.channels.interface import ChannelLimits
from clawbot.channels.pacer import ChatPacer
from clawbot.channels.rendering import render_parts
from clawbot.errors import RateLimitedError
from clawbot.messages import OutboundEdit, OutboundMessage
from clawbot.testing import ChatRules, MemoryChannel, VirtualClock

LIMITS = ChannelLimits(max_message_chars=200, message_interval=1.0, edit_interval=3.0)


def a_chat(
    limits: ChannelLimits = LIMITS, **rules: float
) -> tuple[MemoryChannel, ChatPacer, VirtualClock]:
    """A live channel whose platform enforces ``rules`` (by default the rates it declares),
    and the pacer of its chat ``c1``."""
    clock = VirtualClock()
    enforced = {
        "message_interval": limits.message_interval,
        "edit_interval": limits.edit_interval,
        **rules,
    }
    channel = MemoryChannel(live=True, limits=limits, rules=ChatRules(clock, **enforced))  # type: ignore[arg-type]
    return channel, ChatPacer(channel, "c1", clock), clock


def message(text: str) -> OutboundMessage:
    return OutboundMessage(channel="memory", chat_id="c1", text=text)


async def test_messages_to_one_chat_keep_its_message_interval() -> None:
    channel, pacer, clock = a_chat()

    await asyncio.gather(*(pacer.send(message(f"message {n}")) for n in range(3)))

    assert channel.chat("c1") == ["message 0", "message 1", "message 2"]
    assert channel.rules is not None and channel.rules.refused == 0
    assert clock.now >= 2.0


async def test_two_edits_of_one_message_keep_the_edit_interval() -> None:
    channel, pacer, clock = a_chat()
    (sent,) = await pacer.send(message("draft"))
    assert sent.message_id is not None

    for text in ("draft, longer", "draft, longer still"):
        await pacer.edit(
            OutboundEdit(channel="memory", chat_id="c1", message_id=sent.message_id, text=text)
        )

    assert channel.chat("c1") == ["draft, longer still"]
    assert channel.rules is not None and channel.rules.refused == 0
    assert clock.now >= LIMITS.message_interval + LIMITS.edit_interval


async def test_a_429_is_waited_out_as_long_as_the_platform_asks_and_the_message_sent_once() -> None:
    channel, pacer, clock = a_chat()
    assert channel.rules is not None
    channel.rules.refuse_next, channel.rules.retry_after = 1, 30.0

    await pacer.send(message("after the flood"))

    assert channel.chat("c1") == ["after the flood"]
    assert channel.rules.refused == 1
    assert clock.now >= 30.0


async def test_a_long_message_goes_a_part_a_call_so_a_refused_part_alone_is_sent_again() -> None:
    # the platform is stricter than the limits say: the second part meets a 429
    channel, pacer, _ = a_chat(ChannelLimits(max_message_chars=200), message_interval=1.0)
    text = "\n\n".join(f"Paragraph {n}: " + "word " * 30 for n in range(4))
    parts = [part.source for part in render_parts(text, channel.limits)]
    assert len(parts) > 1

    await pacer.send(message(text))

    assert channel.chat("c1") == parts
    assert channel.rules is not None and channel.rules.refused >= 1


async def test_a_preview_refused_for_now_is_raised_not_waited_for() -> None:
    channel, pacer, clock = a_chat()
    assert channel.rules is not None
    channel.rules.refuse_next, channel.rules.retry_after = 1, 30.0

    try:
        await pacer.preview(message("a preview"))
    except RateLimitedError as exc:
        assert exc.retry_after == 30.0
    else:
        raise AssertionError("the refused preview was not raised")

    assert channel.chat("c1") == []
    assert clock.now == 0.0


async def test_a_typing_indicator_is_left_out_while_the_chat_waits_for_its_interval() -> None:
    channel, pacer, _ = a_chat()
    await pacer.send(message("just sent"))

    await pacer.typing(None)

    assert channel.typing == []
