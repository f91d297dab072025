"""The Telegram adapter: pure conversions, then the real library against the stand-in."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr
from telegram import Update

from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.inbound import BotIdentity, update_to_inbound
from adapters.telegram.sending import part_to_send_kwargs
from clawbot.channels.rendering import RenderedPart
from clawbot.errors import ConfigError, DeliveryError, InputError, RateLimitedError
from clawbot.messages import Attachment, InboundMessage, OutboundMessage
from clawbot.settings import Settings
from tests.standins.telegram import (
    DEFAULT_BOT_ID,
    DEFAULT_BOT_USERNAME,
    DEFAULT_GROUP_ID,
    DEFAULT_TOKEN,
    TelegramHarness,
)

BOT = BotIdentity(id=DEFAULT_BOT_ID, username=DEFAULT_BOT_USERNAME)


def make_update(message: dict[str, Any], *, kind: str = "message") -> Update:
    update = Update.de_json({"update_id": 1, kind: message}, None)
    assert update is not None
    return update


def convert(message: dict[str, Any], **kwargs: Any) -> InboundMessage | None:
    return update_to_inbound(make_update(message), BOT, **kwargs)


def message(text: str = "hello", **kwargs: Any) -> dict[str, Any]:
    return TelegramHarness().build_message(text, **kwargs)


class Inbox:
    """Collects what the adapter hands to on_message; waits on a condition, never sleeps."""

    def __init__(self) -> None:
        self.items: list[InboundMessage] = []
        self._changed = asyncio.Condition()

    async def __call__(self, inbound: InboundMessage) -> None:
        async with self._changed:
            self.items.append(inbound)
            self._changed.notify_all()

    async def wait(self, count: int, timeout: float = 10.0) -> list[InboundMessage]:
        async def ready() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.items) >= count)

        await asyncio.wait_for(ready(), timeout)
        return list(self.items)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
async def harness() -> AsyncIterator[TelegramHarness]:
    h = TelegramHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
async def running(harness: TelegramHarness) -> AsyncIterator[tuple[TelegramAdapter, Inbox]]:
    adapter = harness.make_adapter()
    assert isinstance(adapter, TelegramAdapter)
    inbox = Inbox()
    await adapter.start(inbox)
    yield adapter, inbox
    await adapter.stop()


def outbound(text: str, chat_id: str = "1001", **kwargs: Any) -> OutboundMessage:
    return OutboundMessage(channel="telegram", chat_id=chat_id, text=text, **kwargs)


# ---------------------------------------------------------------- pure inbound conversion


def test_dm_becomes_a_dm_inbound_message() -> None:
    inbound = convert(message("hi there", sender_id="1001", sender_name="Ann", message_id="42"))
    assert inbound is not None
    assert (inbound.channel, inbound.chat_id, inbound.chat_type) == ("telegram", "1001", "dm")
    assert (inbound.sender_id, inbound.sender_name) == ("1001", "Ann")
    assert (inbound.text, inbound.message_id) == ("hi there", "42")
    assert inbound.thread_id is None and inbound.reply_to is None and not inbound.mentioned


def test_group_message_without_mention_is_not_mentioned() -> None:
    inbound = convert(message("just chatting", chat_type="group"))
    assert inbound is not None
    assert inbound.chat_type == "group" and inbound.chat_id == str(DEFAULT_GROUP_ID)
    assert inbound.text == "just chatting" and not inbound.mentioned


def test_group_mention_is_stripped_and_marks_mentioned() -> None:
    inbound = convert(message("what time is it?", chat_type="group", mention=True))
    assert inbound is not None
    assert inbound.mentioned and inbound.text == "what time is it?"


def test_mention_after_emoji_is_stripped_using_utf16_offsets() -> None:
    raw = message("", chat_type="group")
    handle = f"@{DEFAULT_BOT_USERNAME}"
    raw["text"] = f"👋 hey {handle} how are you"
    raw["entities"] = [{"type": "mention", "offset": 7, "length": len(handle)}]  # 👋 is 2 units
    inbound = convert(raw)
    assert inbound is not None
    assert inbound.mentioned and inbound.text == "👋 hey how are you"


def test_mention_of_someone_else_is_kept_and_not_mentioned() -> None:
    raw = message("", chat_type="group")
    raw["text"] = "@someone_else look"
    raw["entities"] = [{"type": "mention", "offset": 0, "length": 13}]
    inbound = convert(raw)
    assert inbound is not None
    assert not inbound.mentioned and inbound.text == "@someone_else look"


def test_text_mention_of_the_bot_counts_as_mention() -> None:
    raw = message("", chat_type="group")
    raw["text"] = "Clawbot summarize this"
    raw["entities"] = [
        {
            "type": "text_mention",
            "offset": 0,
            "length": 7,
            "user": {"id": DEFAULT_BOT_ID, "is_bot": True, "first_name": "Clawbot"},
        }
    ]
    inbound = convert(raw)
    assert inbound is not None
    assert inbound.mentioned and inbound.text == "summarize this"


def test_command_addressed_to_the_bot_loses_its_suffix_and_is_mentioned() -> None:
    raw = message("", chat_type="group")
    command = f"/help@{DEFAULT_BOT_USERNAME}"
    raw["text"] = f"{command} models"
    raw["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
    inbound = convert(raw)
    assert inbound is not None
    assert inbound.mentioned and inbound.text == "/help models"


def test_forum_topic_message_has_thread_id_and_no_reply_context() -> None:
    inbound = convert(message("in the topic", chat_type="group", thread_id="55"))
    assert inbound is not None
    assert inbound.thread_id == "55" and inbound.reply_to is None


def test_reply_in_a_plain_group_is_not_a_thread() -> None:
    raw = message("I agree", chat_type="group")
    raw["message_thread_id"] = 90  # Telegram sets this on replies in supergroups
    raw["reply_to_message"] = message(
        "original", chat_type="group", sender_id="2002", sender_name="Bob", message_id="90"
    )
    inbound = convert(raw)
    assert inbound is not None
    assert inbound.thread_id is None
    assert inbound.reply_to is not None and inbound.reply_to.message_id == "90"
    assert inbound.reply_to.sender_name == "Bob" and not inbound.mentioned


def test_reply_to_the_bot_marks_mentioned_with_reply_context() -> None:
    inbound = convert(message("and tomorrow?", chat_type="group", reply_to_bot=True))
    assert inbound is not None
    assert inbound.mentioned
    assert inbound.reply_to is not None
    assert inbound.reply_to.from_bot and inbound.reply_to.text == "An earlier answer from the bot"


def test_document_becomes_attachment_metadata_with_caption_as_text() -> None:
    raw = message("")
    del raw["text"]
    raw["caption"] = "please read"
    raw["document"] = {
        "file_id": "FILE1",
        "file_unique_id": "U1",
        "file_name": "report.pdf",
        "mime_type": "application/pdf",
        "file_size": 1234,
    }
    inbound = convert(raw)
    assert inbound is not None
    assert inbound.text == "please read"
    assert inbound.attachments == (
        Attachment(name="report.pdf", mime_type="application/pdf", size=1234, ref="FILE1"),
    )


def test_photo_uses_the_largest_size() -> None:
    raw = message("")
    del raw["text"]
    raw["photo"] = [
        {"file_id": "SMALL", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
        {"file_id": "BIG", "file_unique_id": "b", "width": 900, "height": 900, "file_size": 99},
    ]
    inbound = convert(raw)
    assert inbound is not None and inbound.text == ""
    assert [(a.ref, a.mime_type, a.size) for a in inbound.attachments] == [
        ("BIG", "image/jpeg", 99)
    ]


def test_own_message_is_ignored() -> None:
    assert convert(message("echo", chat_type="group", from_self=True)) is None


def test_other_bot_is_ignored_by_default() -> None:
    assert convert(message("beep", chat_type="group", from_bot=True)) is None


def test_other_bot_is_kept_when_ignore_other_bots_is_off() -> None:
    inbound = convert(message("beep", chat_type="group", from_bot=True), ignore_other_bots=False)
    assert inbound is not None and inbound.sender_id == "5550001"


def test_channel_post_is_a_channel_message_from_the_channel() -> None:
    post = {
        "message_id": 7,
        "date": 1700000000,
        "text": "news",
        "chat": {"id": -1002000000002, "type": "channel", "title": "News"},
        "sender_chat": {"id": -1002000000002, "type": "channel", "title": "News"},
    }
    inbound = update_to_inbound(make_update(post, kind="channel_post"), BOT)
    assert inbound is not None
    assert inbound.chat_type == "channel" and inbound.sender_name == "News"


def test_service_message_without_text_is_ignored() -> None:
    raw = message("")
    del raw["text"]
    raw["new_chat_members"] = [{"id": 3003, "is_bot": False, "first_name": "Cy"}]
    assert convert(raw) is None


def test_malformed_update_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    raw = message("")
    raw["text"] = "😀 hi"
    raw["entities"] = [{"type": "mention", "offset": 1, "length": 1}]  # splits the emoji
    with caplog.at_level(logging.WARNING, logger="adapters.telegram"):
        assert convert(raw) is None
    assert "skipped malformed update" in caplog.text


# ---------------------------------------------------------------- pure outbound conversion


def test_part_becomes_html_send_into_thread_replying_to_the_message() -> None:
    part = RenderedPart(text="<b>hi</b>", plain="hi", markup="telegram_html")
    kwargs = part_to_send_kwargs(
        part,
        outbound("**hi**", chat_id="-100123", thread_id="55", reply_to_message_id="9"),
        first=True,
    )
    assert kwargs["chat_id"] == -100123 and kwargs["text"] == "<b>hi</b>"
    assert kwargs["parse_mode"] == "HTML" and kwargs["message_thread_id"] == 55
    assert kwargs["reply_parameters"].message_id == 9


def test_an_answer_in_a_persons_own_chat_quotes_no_message() -> None:
    """In a DM the answers follow the questions in order: no quote (in a group, one)."""
    part = RenderedPart(text="hi", plain="hi", markup="telegram_html")
    kwargs = part_to_send_kwargs(
        part, outbound("hi", chat_id="1001", reply_to_message_id="9"), first=True
    )
    assert "reply_parameters" not in kwargs


def test_later_parts_and_plain_fallback_carry_no_reply_and_no_parse_mode() -> None:
    part = RenderedPart(text="<b>hi</b>", plain="hi", markup="telegram_html")
    kwargs = part_to_send_kwargs(
        part, outbound("**hi**", reply_to_message_id="9"), first=False, plain=True
    )
    assert kwargs == {"chat_id": 1001, "text": "hi"}


# ---------------------------------------------------------------- settings


def test_check_settings_accepts_a_well_formed_token() -> None:
    assert TelegramAdapter.check_settings(Settings(telegram_token=SecretStr(DEFAULT_TOKEN))) == []


def test_check_settings_reports_a_malformed_token_without_echoing_it() -> None:
    problems = TelegramAdapter.check_settings(
        Settings(telegram_token=SecretStr("oops-secret-value"))
    )
    assert problems and "CLAWBOT_TELEGRAM_TOKEN" in problems[0]
    assert all("oops-secret-value" not in p for p in problems)


def test_check_settings_requires_webhook_url_and_secret_in_webhook_mode() -> None:
    problems = TelegramAdapter.check_settings(
        Settings(telegram_token=SecretStr(DEFAULT_TOKEN), telegram_mode="webhook")
    )
    joined = " ".join(problems)
    assert "CLAWBOT_TELEGRAM_WEBHOOK_URL" in joined and "CLAWBOT_TELEGRAM_WEBHOOK_SECRET" in joined


def test_is_configured_only_with_a_token() -> None:
    assert TelegramAdapter.is_configured(Settings(telegram_token=SecretStr(DEFAULT_TOKEN)))
    assert not TelegramAdapter.is_configured(Settings(telegram_token=None))


def test_repr_never_shows_the_token() -> None:
    adapter = TelegramAdapter.from_settings(Settings(telegram_token=SecretStr(DEFAULT_TOKEN)))
    assert DEFAULT_TOKEN not in repr(adapter) and DEFAULT_TOKEN.split(":")[1] not in repr(adapter)


# ---------------------------------------------------------------- end to end, polling


async def test_dm_reaches_on_message(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    _, inbox = running
    message_id = await harness.inject_message("hello bot", sender_id="1001", sender_name="Ann")
    [inbound] = await inbox.wait(1)
    assert (inbound.chat_id, inbound.chat_type, inbound.sender_id) == ("1001", "dm", "1001")
    assert (inbound.text, inbound.message_id) == ("hello bot", message_id)


async def test_group_mention_arrives_stripped_and_own_messages_do_not(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    _, inbox = running
    await harness.inject_message("talking to myself", chat_type="group", from_self=True)
    await harness.inject_message("from a bot", chat_type="group", from_bot=True)
    await harness.inject_message("status?", chat_type="group", mention=True)
    [inbound] = await inbox.wait(1)
    assert inbound.mentioned and inbound.text == "status?"


async def test_redelivered_message_keeps_its_message_id(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    _, inbox = running
    first = await harness.inject_message("once")
    await harness.inject_message("once", message_id=first)
    received = await inbox.wait(2)
    assert [m.message_id for m in received] == [first, first]


async def test_long_reply_with_straddling_code_block_arrives_in_order_within_limit(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, _ = running
    prose = "\n\n".join(f"Paragraph {i:03d} " + "words " * 40 for i in range(14))
    code = "\n".join(f"print('line {i:04d}')" for i in range(300))
    text = f"{prose}\n\n```python\n{code}\n```\n\nThat is all."
    assert len(prose) < 4096 < len(prose) + len(code)  # the fence straddles the limit

    sent = await adapter.send(outbound(text))

    records = harness.sent()
    assert len(records) == len(sent) >= 2
    assert [r.message_id for r in records] == [s.message_id for s in sent]
    assert all(len(r.text.encode("utf-16-le")) // 2 <= 4096 for r in records)
    assert all(r.formatted for r in records)
    visible = "\n".join(r.text for r in records)
    positions = [visible.index(f"line {i:04d}") for i in range(300)]
    assert positions == sorted(positions)
    assert visible.index("Paragraph 013") < positions[0] < visible.index("That is all.")
    code_parts = [r for r in records if "print(" in r.text]
    assert len(code_parts) >= 2 and all("<pre>" in r.raw["text"] for r in code_parts)


async def test_rejected_formatting_is_resent_as_plain_text(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, _ = running
    harness.reject_formatting_next()
    await adapter.send(outbound("**bold** move"))
    [record] = harness.sent()
    assert not record.formatted and record.text == "bold move"


async def test_a_flood_limited_send_raises_rate_limited_with_telegrams_retry_after(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    """Nothing was posted, so the chat's pacer may send it again once the wait is over."""
    adapter, _ = running
    harness.fail_next_sends(1, retry_after=3)  # PTB raises RetryAfter for a nonzero value
    with pytest.raises(RateLimitedError) as refused:
        await adapter.send(outbound("after the pause"))
    assert refused.value.retry_after == 3.0
    assert harness.sent() == []


async def test_a_flood_limit_without_a_wait_is_raised_as_waiting_no_time(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, _ = running
    harness.fail_next_sends(1, retry_after=0)  # PTB's NetworkError "Too Many Requests"
    with pytest.raises(RateLimitedError) as refused:
        await adapter.send(outbound("after the pause"))
    assert refused.value.retry_after == 0.0
    assert harness.sent() == []


async def test_persistent_rate_limit_raises_delivery_error_naming_the_chat(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, _ = running
    harness.fail_next_sends(50, retry_after=0)
    with pytest.raises(DeliveryError) as caught:
        await adapter.send(outbound("never", chat_id="1001"))
    assert "1001" in str(caught.value) and DEFAULT_TOKEN not in str(caught.value)
    assert harness.sent() == []


async def test_server_error_raises_delivery_error_without_the_token(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, _ = running
    harness.fail_next_sends(1, status=500)
    with pytest.raises(DeliveryError) as caught:
        await adapter.send(outbound("boom", chat_id="-1001000000001"))
    assert "-1001000000001" in str(caught.value) and DEFAULT_TOKEN not in str(caught.value)


async def test_reply_lands_in_the_thread_as_a_reply(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, inbox = running
    await harness.inject_message("question", chat_type="group", mention=True, thread_id="55")
    [inbound] = await inbox.wait(1)
    await adapter.send(
        outbound(
            "answer",
            chat_id=inbound.chat_id,
            thread_id=inbound.thread_id,
            reply_to_message_id=inbound.message_id,
        )
    )
    [record] = harness.sent()
    assert (record.chat_id, record.thread_id) == (str(DEFAULT_GROUP_ID), "55")
    assert record.raw["reply_parameters"]["message_id"] == int(inbound.message_id or 0)


async def test_typing_indicator_reaches_the_chat(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, _ = running
    await adapter.send_typing("1001")
    assert await harness.wait_typing(1) == ["1001"]


async def test_attachment_under_the_cap_is_fetched(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, inbox = running
    await harness.inject_document(b"quarterly numbers", file_name="q.txt", caption="see file")
    [inbound] = await inbox.wait(1)
    [attachment] = inbound.attachments
    assert (attachment.name, attachment.size) == ("q.txt", 17)
    assert await adapter.fetch_attachment(attachment, max_bytes=1024) == b"quarterly numbers"


async def test_attachment_over_the_cap_is_refused(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, inbox = running
    await harness.inject_document(b"x" * 2048, file_name="big.bin")
    [inbound] = await inbox.wait(1)
    [attachment] = inbound.attachments
    with pytest.raises(InputError, match="over the 1024-byte limit"):
        await adapter.fetch_attachment(attachment, max_bytes=1024)
    sizeless = attachment.model_copy(update={"size": None})
    with pytest.raises(InputError, match="over the 1024-byte limit"):
        await adapter.fetch_attachment(sizeless, max_bytes=1024)


async def test_handler_failure_does_not_stop_intake(harness: TelegramHarness) -> None:
    inbox = Inbox()

    async def flaky(inbound: InboundMessage) -> None:
        if inbound.text == "explode":
            raise RuntimeError("handler bug")
        await inbox(inbound)

    adapter = harness.make_adapter()
    await adapter.start(flaky)
    try:
        await harness.inject_message("explode")
        await harness.inject_message("still here")
        [inbound] = await inbox.wait(1)
        assert inbound.text == "still here"
    finally:
        await adapter.stop()


async def test_malformed_update_does_not_stop_polling(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    _, inbox = running
    broken = harness.build_message("")
    broken["text"] = "😀 hi"
    broken["entities"] = [{"type": "mention", "offset": 1, "length": 1}]
    await harness.inject_update({"message": broken})
    await harness.inject_update({"update_id": 999_999, "edited_message": broken})
    await harness.inject_message("fine")
    [inbound] = await inbox.wait(1)
    assert inbound.text == "fine"


async def test_unparseable_update_is_confirmed_and_polling_continues(
    harness: TelegramHarness,
    running: tuple[TelegramAdapter, Inbox],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, inbox = running
    with caplog.at_level(logging.WARNING, logger="adapters.telegram"):
        await harness.inject_update({"message": {"message_id": 5, "text": "no chat, no date"}})
        await harness.inject_message("fine")
        [inbound] = await inbox.wait(1)
    assert inbound.text == "fine"
    assert "skipped malformed update" in caplog.text


async def test_polling_reconnects_after_network_loss(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    _, inbox = running
    await harness.inject_message("before")
    await inbox.wait(1)
    await harness.server.stop()
    await harness.server.start()  # same port, after the connections were dropped
    await harness.inject_message("after")
    received = await inbox.wait(2, timeout=15)
    assert [m.text for m in received] == ["before", "after"]


async def test_an_update_whose_handler_never_returned_is_fetched_again_by_the_next_start(
    harness: TelegramHarness,
) -> None:
    entered = asyncio.Event()

    async def never_returns(inbound: InboundMessage) -> None:
        entered.set()
        await asyncio.Event().wait()  # the process dies before the message is stored

    crashed = harness.make_adapter(shutdown_timeout=0.2)
    await crashed.start(never_returns)
    message_id = await harness.inject_message("keep me")
    await asyncio.wait_for(entered.wait(), 10)
    await crashed.stop()  # gives up on the handler after shutdown_timeout

    inbox = Inbox()
    restarted = harness.make_adapter()
    await restarted.start(inbox)
    try:
        [inbound] = await inbox.wait(1)
    finally:
        await restarted.stop()
    assert (inbound.text, inbound.message_id) == ("keep me", message_id)


async def test_a_failed_handler_gets_the_update_again_before_later_ones(
    harness: TelegramHarness,
) -> None:
    inbox = Inbox()
    failures = [RuntimeError("the store is busy")]

    async def fails_once(inbound: InboundMessage) -> None:
        if failures:
            raise failures.pop()
        await inbox(inbound)

    adapter = harness.make_adapter()
    await adapter.start(fails_once)
    try:
        await harness.inject_message("first")
        await harness.inject_message("second")
        received = await inbox.wait(2)
    finally:
        await adapter.stop()
    assert [m.text for m in received] == ["first", "second"]


async def test_stop_confirms_every_update_that_was_handed_over(
    harness: TelegramHarness, running: tuple[TelegramAdapter, Inbox]
) -> None:
    adapter, inbox = running
    await harness.inject_message("one")
    await harness.inject_message("two")
    await inbox.wait(2)

    await asyncio.wait_for(adapter.stop(), timeout=5)

    assert harness.server.updates == []
    assert harness.server.confirmed_through == 2


async def test_a_second_process_polling_the_same_bot_is_reported_as_a_conflict(
    harness: TelegramHarness,
    running: tuple[TelegramAdapter, Inbox],
    caplog: pytest.LogCaptureFixture,
) -> None:
    second = harness.make_adapter()
    with caplog.at_level(logging.WARNING, logger="adapters.telegram"):
        await second.start(Inbox())
        try:
            await harness.server.wait_for(
                lambda: "is another process running this bot?" in caplog.text, timeout=10
            )
        finally:
            await second.stop()
    assert DEFAULT_TOKEN not in caplog.text


async def test_stop_returns_promptly_and_is_idempotent(harness: TelegramHarness) -> None:
    adapter = harness.make_adapter()
    await adapter.start(Inbox())
    await asyncio.wait_for(adapter.stop(), timeout=5)
    await asyncio.wait_for(adapter.stop(), timeout=1)
    assert not harness.server.webhook_url
    with pytest.raises(DeliveryError):
        await adapter.send(outbound("after stop"))


async def test_bad_token_fails_start_with_config_error_without_the_token(
    harness: TelegramHarness,
) -> None:
    wrong = "999999:" + "Z" * 35
    adapter = harness.make_adapter(telegram_token=wrong)
    with pytest.raises(ConfigError) as caught:
        await adapter.start(Inbox())
    assert wrong not in str(caught.value) and "Z" * 35 not in str(caught.value)


async def test_token_never_appears_in_logs(
    harness: TelegramHarness, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        adapter = harness.make_adapter()
        inbox = Inbox()
        await adapter.start(inbox)
        await harness.inject_message("hi")
        await inbox.wait(1)
        await adapter.send(outbound("hello"))
        await adapter.stop()
    assert "getUpdates" in caplog.text  # the library did log its requests
    assert DEFAULT_TOKEN not in caplog.text
    assert DEFAULT_TOKEN.split(":")[1] not in caplog.text


# ---------------------------------------------------------------- end to end, webhook


def webhook_adapter(harness: TelegramHarness, port: int = 0) -> tuple[TelegramAdapter, str]:
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/telegram"
    adapter = harness.make_adapter(
        telegram_mode="webhook",
        telegram_webhook_url=url,
        telegram_webhook_listen="127.0.0.1",
        telegram_webhook_port=port,
        telegram_webhook_path="/telegram",
        telegram_webhook_secret="hook-secret_123",
    )
    assert isinstance(adapter, TelegramAdapter)
    return adapter, url


@pytest.fixture
async def webhook(harness: TelegramHarness) -> AsyncIterator[tuple[TelegramAdapter, Inbox, str]]:
    adapter, url = webhook_adapter(harness)
    inbox = Inbox()
    await adapter.start(inbox)
    yield adapter, inbox, url
    await adapter.stop()


async def post_update(url: str, update: dict[str, Any], secret: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Telegram-Bot-Api-Secret-Token"] = secret
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=json.dumps(update), headers=headers) as response,
    ):
        return response.status


async def test_webhook_mode_registers_and_receives_updates_with_the_secret(
    harness: TelegramHarness, webhook: tuple[TelegramAdapter, Inbox, str]
) -> None:
    _, inbox, url = webhook
    assert harness.server.webhook_url == url
    assert harness.server.webhook_secret == "hook-secret_123"
    update = {"update_id": 50, "message": harness.build_message("via webhook", message_id="77")}
    assert await post_update(url, update, "hook-secret_123") == 200
    [inbound] = await inbox.wait(1)
    assert (inbound.text, inbound.message_id) == ("via webhook", "77")


async def test_harness_injection_is_delivered_through_the_webhook(
    harness: TelegramHarness, webhook: tuple[TelegramAdapter, Inbox, str]
) -> None:
    _, inbox, _ = webhook
    await harness.inject_message("pushed", chat_type="group", mention=True)
    [inbound] = await inbox.wait(1)
    assert inbound.text == "pushed" and inbound.mentioned


async def test_webhook_refuses_missing_or_wrong_secret(
    harness: TelegramHarness, webhook: tuple[TelegramAdapter, Inbox, str]
) -> None:
    _, inbox, url = webhook
    update = {"update_id": 51, "message": harness.build_message("forged")}
    assert await post_update(url, update, None) == 403
    assert await post_update(url, update, "guess") == 403
    await harness.inject_message("genuine")
    [inbound] = await inbox.wait(1)
    assert inbound.text == "genuine"


async def test_webhook_answers_500_when_the_handler_fails_and_telegram_delivers_again(
    harness: TelegramHarness,
) -> None:
    inbox = Inbox()
    failures = [RuntimeError("the store is busy")]

    async def fails_once(inbound: InboundMessage) -> None:
        if failures:
            raise failures.pop()
        await inbox(inbound)

    adapter, _ = webhook_adapter(harness)
    await adapter.start(fails_once)
    try:
        await harness.inject_message("again, please")
        [inbound] = await inbox.wait(1)
        await harness.server.wait_for(lambda: len(harness.server.webhook_attempts) == 2)
    finally:
        await adapter.stop()
    assert inbound.text == "again, please"
    assert [a.status for a in harness.server.webhook_attempts] == [500, 200]
    assert harness.server.updates == []


async def test_a_webhook_port_in_use_fails_start_naming_the_port(harness: TelegramHarness) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        adapter, _ = webhook_adapter(harness, port)
        with pytest.raises(ConfigError) as caught:
            await adapter.start(Inbox())
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert "CLAWBOT_TELEGRAM_WEBHOOK_PORT" in str(caught.value)
    assert not adapter.running
