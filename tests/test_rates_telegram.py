"""The Telegram adapter under Telegram's flood control, edits and drafts, against the stand-in.

The stand-in keeps Telegram's per-chat and per-group budgets (tests/standins/telegram.py);
tests that must exhaust one deterministically freeze its clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.edits import edit_text
from clawbot.channels.rendering import RenderedPart
from clawbot.clock import ManualClock
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import (
    InboundMessage,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
)
from tests.standins.rate_rules import RateBook, TokenBucket
from tests.standins.telegram import DEFAULT_GROUP_ID, TelegramHarness, TelegramRates

PRIVATE = "1001"
GROUP = str(DEFAULT_GROUP_ID)


async def ignore(_message: InboundMessage) -> None:
    return None


@pytest.fixture
async def harness() -> AsyncIterator[TelegramHarness]:
    h = TelegramHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
async def adapter(harness: TelegramHarness) -> AsyncIterator[TelegramAdapter]:
    made = harness.make_adapter()
    assert isinstance(made, TelegramAdapter)
    await made.start(ignore)
    yield made
    await made.stop()


@pytest.fixture
def frozen(harness: TelegramHarness) -> ManualClock:
    """The stand-in's clock, stopped: a budget refills only when the test says so."""
    clock = ManualClock()
    harness.server.book = RateBook(clock=clock.monotonic, resolution=1.0)
    return clock


async def post(adapter: TelegramAdapter, chat: str, text: str) -> str:
    (sent,) = await adapter.send(OutboundMessage(channel="telegram", chat_id=chat, text=text))
    assert sent.message_id is not None
    return sent.message_id


def edit(chat: str, message_id: str, text: str) -> OutboundEdit:
    return OutboundEdit(channel="telegram", chat_id=chat, message_id=message_id, text=text)


def deletion(chat: str, message_id: str) -> OutboundDeletion:
    return OutboundDeletion(channel="telegram", chat_id=chat, message_id=message_id)


# ---- flood control ----------------------------------------------------------------------------


async def test_an_edit_over_the_chats_budget_raises_rate_limited_with_telegrams_retry_after(
    harness: TelegramHarness, adapter: TelegramAdapter, frozen: ManualClock
) -> None:
    message_id = await post(adapter, PRIVATE, "one")
    await adapter.edit(edit(PRIVATE, message_id, "one two"))
    await adapter.edit(edit(PRIVATE, message_id, "one two three"))  # the burst of 3 is spent

    with pytest.raises(RateLimitedError) as refused:
        await adapter.edit(edit(PRIVATE, message_id, "one two three four"))

    assert refused.value.retry_after == 1.0
    assert harness.server.chat_shows(int(PRIVATE)) == ["one two three"]
    assert harness.server.book.activity(PRIVATE).refused == 1


async def test_a_deletion_over_the_chats_budget_raises_rate_limited_and_deletes_nothing(
    harness: TelegramHarness, adapter: TelegramAdapter, frozen: ManualClock
) -> None:
    first, second = await post(adapter, PRIVATE, "one"), await post(adapter, PRIVATE, "two")
    await adapter.delete(deletion(PRIVATE, first))  # the burst of 3 is spent

    with pytest.raises(RateLimitedError) as refused:
        await adapter.delete(deletion(PRIVATE, second))
    frozen.advance(1)
    with pytest.raises(DeliveryError, match="Message to delete not found"):
        await adapter.delete(deletion(PRIVATE, first))

    assert refused.value.retry_after == 1.0
    assert harness.server.chat_shows(int(PRIVATE)) == ["two"]


async def test_a_draft_over_the_chats_budget_raises_rate_limited_with_telegrams_retry_after(
    harness: TelegramHarness, adapter: TelegramAdapter, frozen: ManualClock
) -> None:
    for text in ("one", "one two", "one two three"):
        await adapter.send_draft(PRIVATE, 7, text)

    with pytest.raises(RateLimitedError) as refused:
        await adapter.send_draft(PRIVATE, 7, "one two three four")

    assert refused.value.retry_after == 1.0
    assert harness.server.draft_shown(int(PRIVATE)) == "one two three"


async def test_a_message_over_the_chats_budget_raises_rate_limited_and_nothing_is_posted(
    harness: TelegramHarness, adapter: TelegramAdapter, frozen: ManualClock
) -> None:
    for n in range(3):
        await post(adapter, PRIVATE, f"message {n}")

    with pytest.raises(RateLimitedError) as refused:
        await post(adapter, PRIVATE, "one too many")

    assert refused.value.retry_after == 1.0  # the chat's pacer waits that long, sends again
    assert harness.server.chat_shows(int(PRIVATE)) == [f"message {n}" for n in range(3)]


async def test_a_file_over_the_chats_budget_raises_rate_limited_and_nothing_is_posted(
    harness: TelegramHarness, adapter: TelegramAdapter, frozen: ManualClock
) -> None:
    for n in range(3):
        await post(adapter, PRIVATE, f"message {n}")
    notes = OutboundFile(channel="telegram", chat_id=PRIVATE, name="notes.txt", data=b"notes")

    with pytest.raises(RateLimitedError) as refused:
        await adapter.send_file(notes)

    assert refused.value.retry_after == 1.0
    assert harness.server.uploads.received == []


async def test_a_groups_messages_and_edits_at_the_adapters_pace_stay_within_its_budget(
    harness: TelegramHarness, adapter: TelegramAdapter, frozen: ManualClock
) -> None:
    """Two minutes of long replies streamed in a group: a preview edited at the group's pace,
    then three parts in a row at the message pace, again and again."""
    group = adapter.limits_for(GROUP)
    text = ""
    for reply in range(5):
        for part in range(3):
            frozen.advance(group.message_interval)
            text = f"reply {reply} part {part}"
            message_id = await post(adapter, GROUP, text)
        for _ in range(5):
            frozen.advance(group.edit_interval)
            text += " word"
            await adapter.edit(edit(GROUP, message_id, text))

    assert harness.server.book.activity(GROUP).refused == 0
    assert harness.server.chat_shows(DEFAULT_GROUP_ID)[-1] == text


async def test_messages_at_the_adapters_pace_stay_within_a_private_chats_budget(
    harness: TelegramHarness, adapter: TelegramAdapter, frozen: ManualClock
) -> None:
    private = adapter.limits_for(PRIVATE)
    for n in range(10):
        await post(adapter, PRIVATE, f"message {n}")
        frozen.advance(private.message_interval)
    for n in range(10):
        await adapter.send_draft(PRIVATE, 7, f"draft {n}")
        frozen.advance(private.edit_interval)

    activity = harness.server.book.activity(PRIVATE)
    assert (activity.messages, activity.drafts, activity.refused) == (10, 10, 0)


async def test_parts_sent_faster_than_telegram_allows_arrive_in_order_once_it_let_them(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    harness.server.rates = TelegramRates(per_chat=TokenBucket(per_second=20.0, burst=1))
    harness.server.book = RateBook(resolution=0.05)
    paragraphs = [f"Paragraph {n}: " + "x" * 3000 for n in range(4)]

    sent = await adapter.send(
        OutboundMessage(channel="telegram", chat_id=PRIVATE, text="\n\n".join(paragraphs))
    )

    assert harness.server.chat_shows(int(PRIVATE)) == paragraphs
    assert len(sent) == 4
    activity = harness.server.book.activity(PRIVATE)
    assert activity.refused > 0
    assert activity.unhonoured == 0


# ---- edits ------------------------------------------------------------------------------------


async def test_an_edit_that_changes_only_the_formatting_reaches_the_chat(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    message_id = await post(adapter, PRIVATE, "Hello world")

    await adapter.edit(edit(PRIVATE, message_id, "Hello **world**"))

    shown = harness.server.messages[(int(PRIVATE), int(message_id))]
    assert shown["text"] == "Hello world"
    assert shown["entities"] == [{"type": "bold", "offset": 6, "length": 5}]


async def test_an_edit_to_what_a_formatted_message_shows_is_taken_as_done(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    message_id = await post(adapter, PRIVATE, "Hello **world**")

    await adapter.edit(edit(PRIVATE, message_id, "Hello **world**"))

    assert [name for name, _ in harness.server.calls].count("editMessageText") == 1
    assert harness.server.book.activity(PRIVATE).edits == 0


async def test_an_edit_longer_than_one_message_is_refused_before_telegram_sees_it(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    message_id = await post(adapter, PRIVATE, "short")

    with pytest.raises(DeliveryError) as refused:
        await adapter.edit(edit(PRIVATE, message_id, "y" * 5000))

    assert "4096" in refused.value.message
    assert "send the rest as new messages" in str(refused.value)
    assert "editMessageText" not in [name for name, _ in harness.server.calls]
    assert harness.server.chat_shows(int(PRIVATE)) == ["short"]


async def test_telegrams_refusal_of_an_edit_over_4096_units_names_the_limit(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    message_id = await post(adapter, PRIVATE, "short")
    oversized = RenderedPart(text="😀" * 2049, plain="😀" * 2049, markup="plain")  # 4098 units

    with pytest.raises(DeliveryError) as refused:
        await edit_text(
            adapter._bot(),
            edit(PRIVATE, message_id, "ignored"),
            oversized,
            int(PRIVATE),
            scrub=str,
        )

    assert not isinstance(refused.value, RateLimitedError)
    assert "over its 4096-unit limit" in refused.value.message
    assert harness.server.chat_shows(int(PRIVATE)) == ["short"]


# ---- drafts -----------------------------------------------------------------------------------


async def test_a_draft_shows_in_a_private_chat_rendered_as_a_message(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    await adapter.send_draft(PRIVATE, 7, "Hello **wor")
    await adapter.send_draft(PRIVATE, 7, "Hello **world**")

    assert harness.server.draft_shown(int(PRIVATE)) == "Hello world"
    (_, params) = [call for call in harness.server.calls if call[0] == "sendMessageDraft"][-1]
    assert params["parse_mode"] == "HTML"
    assert harness.server.book.activity(PRIVATE).drafts == 2
    assert harness.server.chat_shows(int(PRIVATE)) == []


async def test_the_message_that_follows_a_draft_takes_its_place(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    await adapter.send_draft(PRIVATE, 7, "Hello")

    await post(adapter, PRIVATE, "Hello world")

    assert harness.server.draft_shown(int(PRIVATE)) is None
    assert harness.server.chat_shows(int(PRIVATE)) == ["Hello world"]


async def test_a_draft_in_a_group_is_refused_naming_private_chats(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    with pytest.raises(DeliveryError) as refused:
        await adapter.send_draft(GROUP, 7, "Hello")

    assert "only in private chats" in refused.value.message
    assert harness.server.book.activity(GROUP).drafts == 0


async def test_a_draft_longer_than_one_message_is_refused_before_telegram_sees_it(
    harness: TelegramHarness, adapter: TelegramAdapter
) -> None:
    with pytest.raises(DeliveryError) as refused:
        await adapter.send_draft(PRIVATE, 7, "z" * 5000)

    assert "4096" in refused.value.message
    assert "sendMessageDraft" not in [name for name, _ in harness.server.calls]
