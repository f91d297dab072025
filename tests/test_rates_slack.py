"""The Slack adapter under Slack's rate limits and its update rules, against the stand-in.

The stand-in keeps chat.postMessage's per-channel and chat.update's workspace-wide budgets
(tests/standins/slack.py); tests that must exhaust one deterministically freeze its clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.slack.adapter import SlackAdapter
from adapters.slack.edits import update
from clawbot.channels.rendering import RenderedPart
from clawbot.clock import ManualClock
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import InboundMessage, OutboundDeletion, OutboundEdit, OutboundMessage
from tests.standins.rate_rules import RateBook, TokenBucket
from tests.standins.slack import SlackHarness, SlackRates

CHANNEL = "C0GENERAL"


async def ignore(_message: InboundMessage) -> None:
    return None


@pytest.fixture
async def harness() -> AsyncIterator[SlackHarness]:
    h = SlackHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
async def adapter(harness: SlackHarness) -> AsyncIterator[SlackAdapter]:
    made = harness.make_adapter()
    assert isinstance(made, SlackAdapter)
    await made.start(ignore)
    yield made
    await made.stop()


@pytest.fixture
def frozen(harness: SlackHarness) -> ManualClock:
    """The stand-in's clock, stopped: a budget refills only when the test says so."""
    clock = ManualClock()
    harness.standin.book = RateBook(clock=clock.monotonic, resolution=1.0)
    return clock


async def post(adapter: SlackAdapter, text: str) -> str:
    (sent,) = await adapter.send(OutboundMessage(channel="slack", chat_id=CHANNEL, text=text))
    assert sent.message_id is not None
    return sent.message_id


def edit(message_id: str, text: str) -> OutboundEdit:
    return OutboundEdit(channel="slack", chat_id=CHANNEL, message_id=message_id, text=text)


async def test_an_update_over_the_workspaces_budget_raises_rate_limited_with_slacks_retry_after(
    harness: SlackHarness, adapter: SlackAdapter, frozen: ManualClock
) -> None:
    message_id = await post(adapter, "word")
    text = "word"
    for _ in range(5):  # Tier 3's burst
        text += " word"
        await adapter.edit(edit(message_id, text))

    with pytest.raises(RateLimitedError) as refused:
        await adapter.edit(edit(message_id, text + " more"))

    assert refused.value.retry_after == 2.0  # 1.2 s for one more call, in whole seconds
    assert harness.standin.chat_shows(CHANNEL) == [text]


async def test_a_message_over_the_channels_budget_raises_rate_limited_and_nothing_is_posted(
    harness: SlackHarness, adapter: SlackAdapter, frozen: ManualClock
) -> None:
    for n in range(3):  # the burst
        await post(adapter, f"message {n}")

    with pytest.raises(RateLimitedError) as refused:
        await post(adapter, "one too many")

    assert refused.value.retry_after == 1.0  # the chat's pacer waits that long, sends again
    assert harness.standin.chat_shows(CHANNEL) == [f"message {n}" for n in range(3)]


async def test_updates_at_the_adapters_pace_stay_within_the_workspaces_budget(
    harness: SlackHarness, adapter: SlackAdapter, frozen: ManualClock
) -> None:
    message_id = await post(adapter, "word")
    text = "word"
    for _ in range(60):
        frozen.advance(adapter.limits.edit_interval)
        text += " word"
        await adapter.edit(edit(message_id, text))

    assert harness.standin.book.activity(CHANNEL).refused == 0
    assert harness.standin.chat_shows(CHANNEL) == [text]


async def test_messages_at_the_adapters_pace_stay_within_a_channels_budget(
    harness: SlackHarness, adapter: SlackAdapter, frozen: ManualClock
) -> None:
    for n in range(10):
        await post(adapter, f"message {n}")
        frozen.advance(adapter.limits.message_interval)

    activity = harness.standin.book.activity(CHANNEL)
    assert (activity.messages, activity.refused) == (10, 0)


async def test_parts_faster_than_slack_allows_arrive_in_order_once_it_let_them(
    harness: SlackHarness, adapter: SlackAdapter
) -> None:
    harness.standin.rates = SlackRates(post=TokenBucket(per_second=20.0, burst=1))
    harness.standin.book = RateBook(resolution=0.05)
    paragraphs = [f"Paragraph {n}: " + "x" * 3000 for n in range(3)]

    await adapter.send(
        OutboundMessage(channel="slack", chat_id=CHANNEL, text="\n\n".join(paragraphs))
    )

    assert harness.standin.chat_shows(CHANNEL) == paragraphs
    activity = harness.standin.book.activity(CHANNEL)
    assert activity.refused > 0
    assert activity.unhonoured == 0


async def test_an_update_to_what_the_message_shows_is_done(
    harness: SlackHarness, adapter: SlackAdapter
) -> None:
    message_id = await post(adapter, "Hello *world*")

    await adapter.edit(edit(message_id, "Hello **world**"))
    await adapter.edit(edit(message_id, "Hello **world**"))

    assert harness.standin.chat_shows(CHANNEL) == ["Hello *world*"]


async def test_an_update_longer_than_one_message_is_refused_before_slack_sees_it(
    harness: SlackHarness, adapter: SlackAdapter
) -> None:
    message_id = await post(adapter, "short")

    with pytest.raises(DeliveryError) as refused:
        await adapter.edit(edit(message_id, "y" * 4500))

    assert "4000" in refused.value.message
    assert "send the rest as new messages" in str(refused.value)
    assert "chat.update" not in [method for method, _ in harness.standin.api_calls]
    assert harness.standin.chat_shows(CHANNEL) == ["short"]


async def test_slacks_refusal_of_an_update_over_40000_characters_names_the_limit(
    harness: SlackHarness, adapter: SlackAdapter
) -> None:
    message_id = await post(adapter, "short")
    oversized = RenderedPart(text="y" * 40_001, plain="y" * 40_001, markup="plain")

    with pytest.raises(DeliveryError) as refused:
        await update(adapter._client, edit(message_id, "ignored"), oversized)

    assert not isinstance(refused.value, RateLimitedError)
    assert "40,000-character limit" in refused.value.message
    assert harness.standin.chat_shows(CHANNEL) == ["short"]


def deletion(message_id: str) -> OutboundDeletion:
    return OutboundDeletion(channel="slack", chat_id=CHANNEL, message_id=message_id)


async def test_a_deletion_over_its_budget_raises_rate_limited_and_a_deleted_message_is_gone(
    harness: SlackHarness, adapter: SlackAdapter, frozen: ManualClock
) -> None:
    harness.standin.rates = SlackRates(delete=TokenBucket(per_second=50 / 60, burst=1))
    first, second = await post(adapter, "one"), await post(adapter, "two")
    await adapter.delete(deletion(first))

    with pytest.raises(RateLimitedError):
        await adapter.delete(deletion(second))
    frozen.advance(2)
    with pytest.raises(DeliveryError, match="message_not_found"):
        await adapter.delete(deletion(first))

    assert harness.standin.chat_shows(CHANNEL) == ["two"]
