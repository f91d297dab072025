"""The Discord adapter under Discord's rate limits and its edit rules, against the stand-in.

discord.py paces each bucket from the headers the stand-in reports and waits out a 429
itself; these tests show what reaches clawbot's pacer and what the channel ends up showing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.discord.adapter import DiscordAdapter
from adapters.discord.edits import edit_message
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import InboundMessage, OutboundDeletion, OutboundEdit, OutboundMessage
from tests.standins.discord import GENERAL_CHANNEL_ID, DiscordHarness, DiscordRates
from tests.standins.rate_rules import FixedWindow

CHANNEL = GENERAL_CHANNEL_ID
QUICK_BUCKET = FixedWindow(limit=2, seconds=0.2)
"""Discord's kind of bucket, small and short, so a test runs past it in a moment."""


async def ignore(_message: InboundMessage) -> None:
    return None


@pytest.fixture
async def harness() -> AsyncIterator[DiscordHarness]:
    h = DiscordHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
async def adapter(harness: DiscordHarness) -> AsyncIterator[DiscordAdapter]:
    made = harness.make_adapter()
    assert isinstance(made, DiscordAdapter)
    await made.start(ignore)
    yield made
    await made.stop()


async def post(adapter: DiscordAdapter, text: str) -> str:
    (sent,) = await adapter.send(OutboundMessage(channel="discord", chat_id=CHANNEL, text=text))
    assert sent.message_id is not None
    return sent.message_id


def edit(message_id: str, text: str) -> OutboundEdit:
    return OutboundEdit(channel="discord", chat_id=CHANNEL, message_id=message_id, text=text)


async def test_an_edit_discord_keeps_refusing_raises_rate_limited_with_discords_retry_after(
    harness: DiscordHarness, adapter: DiscordAdapter
) -> None:
    message_id = await post(adapter, "one")
    harness.server.fail_edits = [0.012] * 5  # as many 429s as discord.py tries

    with pytest.raises(RateLimitedError) as refused:
        await adapter.edit(edit(message_id, "one two"))

    assert refused.value.retry_after == pytest.approx(0.012)
    assert harness.server.chat_shows(CHANNEL) == ["one"]


async def test_edits_faster_than_the_channels_bucket_wait_in_discord_py_and_none_is_refused(
    harness: DiscordHarness, adapter: DiscordAdapter
) -> None:
    harness.server.rates = DiscordRates(post=QUICK_BUCKET, edit=QUICK_BUCKET)
    message_id = await post(adapter, "word")
    text = "word"

    for _ in range(5):
        text += " word"
        await adapter.edit(edit(message_id, text))

    assert harness.server.chat_shows(CHANNEL) == [text]
    activity = harness.server.book.activity(CHANNEL)
    assert (activity.edits, activity.refused) == (5, 0)


async def test_parts_faster_than_the_channels_bucket_arrive_in_order_and_none_is_refused(
    harness: DiscordHarness, adapter: DiscordAdapter
) -> None:
    harness.server.rates = DiscordRates(post=QUICK_BUCKET, edit=QUICK_BUCKET)
    paragraphs = [f"Paragraph {n}: " + "x" * 1500 for n in range(5)]

    await adapter.send(
        OutboundMessage(channel="discord", chat_id=CHANNEL, text="\n\n".join(paragraphs))
    )

    assert harness.server.chat_shows(CHANNEL) == paragraphs
    assert harness.server.book.activity(CHANNEL).refused == 0


async def test_an_edit_to_what_the_message_shows_is_done(
    harness: DiscordHarness, adapter: DiscordAdapter
) -> None:
    message_id = await post(adapter, "Hello **world**")

    await adapter.edit(edit(message_id, "Hello **world**"))

    assert harness.server.chat_shows(CHANNEL) == ["Hello **world**"]


async def test_an_edit_longer_than_one_message_is_refused_before_discord_sees_it(
    harness: DiscordHarness, adapter: DiscordAdapter
) -> None:
    message_id = await post(adapter, "short")

    with pytest.raises(DeliveryError) as refused:
        await adapter.edit(edit(message_id, "y" * 2500))

    assert "2000" in refused.value.message
    assert "send the rest as new messages" in str(refused.value)
    assert not [r for r in harness.server.requests if r[0] == "PATCH"]
    assert harness.server.chat_shows(CHANNEL) == ["short"]


async def test_discords_refusal_of_content_over_2000_characters_names_the_limit(
    harness: DiscordHarness, adapter: DiscordAdapter
) -> None:
    message_id = await post(adapter, "short")
    client = adapter._running_client(CHANNEL)
    target = client.get_partial_messageable(int(CHANNEL))

    with pytest.raises(DeliveryError) as refused:
        await edit_message(
            target, edit(message_id, "ignored"), {"content": "y" * 2001, "allowed_mentions": None}
        )

    assert not isinstance(refused.value, RateLimitedError)
    assert "2000 or fewer" in refused.value.message
    assert harness.server.chat_shows(CHANNEL) == ["short"]


def deletion(message_id: str) -> OutboundDeletion:
    return OutboundDeletion(channel="discord", chat_id=CHANNEL, message_id=message_id)


async def test_deletions_faster_than_their_bucket_wait_in_discord_py_and_a_deleted_one_is_gone(
    harness: DiscordHarness, adapter: DiscordAdapter
) -> None:
    harness.server.rates = DiscordRates(post=QUICK_BUCKET, delete=QUICK_BUCKET)
    posted = [await post(adapter, f"message {n}") for n in range(4)]

    for message_id in posted[1:]:
        await adapter.delete(deletion(message_id))
    with pytest.raises(DeliveryError, match="10008"):
        await adapter.delete(deletion(posted[1]))

    assert harness.server.chat_shows(CHANNEL) == ["message 0"]
    activity = harness.server.book.activity(CHANNEL)
    assert (activity.deletes, activity.refused) == (3, 0)
