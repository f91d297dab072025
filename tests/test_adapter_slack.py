"""The Slack adapter: pure conversions, then the real slack-bolt against the local stand-in."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.adapter import SlackAdapter
from adapters.slack.commands import command_to_inbound
from adapters.slack.inbound import BotIdentity, event_to_inbound
from adapters.slack.interactions import RESTARTING, Interactions
from adapters.slack.sending import part_to_post_args
from adapters.slack.users import UserDirectory
from clawbot.channels.interface import NOT_TAKEN_IN
from clawbot.channels.rendering import RenderedPart
from clawbot.errors import ConfigError, DeliveryError, InputError, RateLimitedError
from clawbot.messages import Action, InboundMessage, OutboundMessage
from clawbot.settings import Settings
from tests.standins.slack import (
    APP_TOKEN,
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    SlackHarness,
)

BOT = BotIdentity(user_id=BOT_USER_ID, bot_id=BOT_ID)
WAIT = 5.0


def make_settings(**values: Any) -> Settings:
    """Settings from these values only (no .env file)."""
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def message_event(**fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "message",
        "channel": "C0GENERAL",
        "channel_type": "channel",
        "user": "U1001",
        "user_profile": {"display_name": "Ann", "real_name": "Ann Lee"},
        "text": "hello",
        "ts": "1700000000.000100",
    }
    event.update(fields)
    return event


# -- pure inbound conversion -------------------------------------------------------------------


def test_dm_event_becomes_a_dm_inbound_message() -> None:
    event = message_event(channel="D0ANN", channel_type="im", text="hi there")

    inbound = event_to_inbound(event, bot=BOT)

    assert inbound is not None
    assert (inbound.channel, inbound.chat_id, inbound.chat_type) == ("slack", "D0ANN", "dm")
    assert (inbound.sender_id, inbound.sender_name) == ("U1001", "Ann")
    assert inbound.text == "hi there"
    assert inbound.message_id == "1700000000.000100"
    assert inbound.thread_id is None
    assert inbound.mentioned is False


def test_group_mention_is_stripped_and_marks_the_message_mentioned() -> None:
    event = message_event(text=f"<@{BOT_USER_ID}> what is 2 &amp; 2 &lt;3?")

    inbound = event_to_inbound(event, bot=BOT)

    assert inbound is not None
    assert inbound.chat_type == "group"
    assert inbound.mentioned is True
    assert inbound.text == "what is 2 & 2 <3?"


def test_group_message_without_mention_is_not_mentioned_and_keeps_other_mentions() -> None:
    inbound = event_to_inbound(message_event(text="ping <@U0OTHER> please"), bot=BOT)

    assert inbound is not None
    assert inbound.mentioned is False
    assert inbound.text == "ping <@U0OTHER> please"


def test_app_mention_event_counts_as_mentioned_group_message() -> None:
    event = message_event(type="app_mention", text=f"<@{BOT_USER_ID}> hi")
    del event["channel_type"]

    inbound = event_to_inbound(event, bot=BOT)

    assert inbound is not None
    assert (inbound.chat_type, inbound.mentioned, inbound.text) == ("group", True, "hi")


def test_thread_reply_carries_the_thread_ts_as_thread_id() -> None:
    event = message_event(thread_ts="1700000000.000001", parent_user_id="U0CAROL")

    inbound = event_to_inbound(event, bot=BOT)

    assert inbound is not None
    assert inbound.thread_id == "1700000000.000001"
    assert inbound.reply_to is not None and inbound.reply_to.from_bot is False
    assert inbound.mentioned is False


def test_reply_in_a_thread_the_bot_started_counts_as_reply_to_bot() -> None:
    event = message_event(thread_ts="1700000000.000001", parent_user_id=BOT_USER_ID)

    inbound = event_to_inbound(event, bot=BOT)

    assert inbound is not None
    assert inbound.mentioned is True
    assert inbound.reply_to is not None
    assert (inbound.reply_to.message_id, inbound.reply_to.from_bot) == ("1700000000.000001", True)


def test_files_become_attachment_metadata_fetched_on_demand() -> None:
    files = [
        {"id": "F01", "name": "notes.txt", "mimetype": "text/plain", "size": 12},
        {"id": "F02", "mode": "tombstone"},
    ]
    event = message_event(subtype="file_share", text="", files=files)

    inbound = event_to_inbound(event, bot=BOT)

    assert inbound is not None
    assert inbound.text == ""
    assert [(a.name, a.mime_type, a.size, a.ref) for a in inbound.attachments] == [
        ("notes.txt", "text/plain", 12, "F01")
    ]


def test_the_bots_own_message_is_ignored_even_when_other_bots_are_allowed() -> None:
    event = message_event(user=BOT_USER_ID, bot_id=BOT_ID)

    assert event_to_inbound(event, bot=BOT, ignore_other_bots=False) is None


def test_another_bots_message_is_ignored_by_default_and_accepted_on_request() -> None:
    event = message_event(user="U0HELPER", bot_id="B0HELPER", bot_profile={"name": "Helper"})
    del event["user_profile"]

    assert event_to_inbound(event, bot=BOT) is None
    accepted = event_to_inbound(event, bot=BOT, ignore_other_bots=False)
    assert accepted is not None and accepted.sender_name == "Helper"


def test_edits_deletions_and_empty_messages_are_ignored() -> None:
    assert event_to_inbound(message_event(subtype="message_changed"), bot=BOT) is None
    assert event_to_inbound(message_event(subtype="message_deleted"), bot=BOT) is None
    assert event_to_inbound(message_event(text=f"<@{BOT_USER_ID}>"), bot=BOT) is None


@pytest.mark.parametrize(
    "event",
    [
        None,
        "not an object",
        {"type": "message"},
        message_event(channel=42),
        message_event(text=["a"]),
        message_event(files=[{"name": "no id"}]),
        message_event(user=None),
    ],
    ids=["none", "string", "bare", "channel-int", "text-list", "file-no-id", "no-sender"],
)
def test_malformed_event_is_skipped_with_a_warning(
    event: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="adapters.slack"):
        assert event_to_inbound(event, bot=BOT) is None
    assert "malformed" in caplog.text


# -- pure outbound conversion ------------------------------------------------------------------


def test_formatted_part_goes_out_as_mrkdwn_in_its_thread() -> None:
    part = RenderedPart(text="*bold*", plain="bold", markup="slack_mrkdwn")

    args = part_to_post_args("C1", "1700000000.000001", part)

    assert args == {
        "channel": "C1",
        "text": "*bold*",
        "mrkdwn": True,
        "thread_ts": "1700000000.000001",
    }


def test_plain_fallback_turns_mrkdwn_off_and_cannot_ping_the_channel() -> None:
    part = RenderedPart(text="x", plain="<!channel> a & b", markup="slack_mrkdwn")

    args = part_to_post_args("C1", None, part, formatted=False)

    assert args == {"channel": "C1", "text": "&lt;!channel&gt; a &amp; b", "mrkdwn": False}


# -- settings ----------------------------------------------------------------------------------


def test_check_settings_names_bad_tokens_without_showing_them() -> None:
    settings = make_settings(
        slack_bot_token="xoxp-user-token-secret",
        slack_app_token="not-an-app-token-secret",
    )

    problems = SlackAdapter.check_settings(settings)

    assert any("CLAWBOT_SLACK_BOT_TOKEN" in p and "xoxb-" in p for p in problems)
    assert any("CLAWBOT_SLACK_APP_TOKEN" in p and "xapp-" in p for p in problems)
    assert not any("secret" in p for p in problems)


def test_http_mode_needs_a_signing_secret_not_an_app_token() -> None:
    settings = make_settings(
        slack_bot_token=BOT_TOKEN,
        slack_mode="http",
    )

    problems = SlackAdapter.check_settings(settings)

    assert len(problems) == 1 and "CLAWBOT_SLACK_SIGNING_SECRET is not set" in problems[0]
    with pytest.raises(ConfigError):
        SlackAdapter.from_settings(settings)


def test_adapter_repr_hides_tokens() -> None:
    settings = make_settings(
        slack_bot_token=BOT_TOKEN,
        slack_app_token=APP_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
    )
    adapter = SlackAdapter.from_settings(settings)

    assert SlackAdapter.is_configured(settings)
    assert BOT_TOKEN not in repr(adapter) and APP_TOKEN not in repr(adapter)


# -- end to end: the real library against the stand-in ------------------------------------------


class Inbox:
    """Collects what the adapter hands to on_message."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[InboundMessage] = asyncio.Queue()

    async def __call__(self, message: InboundMessage) -> None:
        await self.queue.put(message)

    async def next(self) -> InboundMessage:
        return await asyncio.wait_for(self.queue.get(), WAIT)


@pytest.fixture
async def harness() -> AsyncIterator[SlackHarness]:
    h = SlackHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
async def http_harness() -> AsyncIterator[SlackHarness]:
    h = SlackHarness(mode="http")
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
async def running(harness: SlackHarness) -> AsyncIterator[tuple[SlackAdapter, Inbox]]:
    adapter = harness.make_adapter()
    assert isinstance(adapter, SlackAdapter)
    inbox = Inbox()
    await adapter.start(inbox)
    yield adapter, inbox
    await adapter.stop()


Running = tuple[SlackAdapter, Inbox]


async def test_dm_reaches_on_message_as_a_normalized_message(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running

    ts = await harness.inject_message("hello bot", sender_id="U1001", sender_name="Ann")

    inbound = await inbox.next()
    assert (inbound.chat_id, inbound.chat_type, inbound.text) == ("DU1001", "dm", "hello bot")
    assert (inbound.sender_id, inbound.sender_name, inbound.message_id) == ("U1001", "Ann", ts)


async def test_channel_mention_delivered_twice_by_slack_yields_one_message(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running

    await harness.inject_message("summarize", chat_type="group", mention=True)
    await harness.inject_message("after", chat_type="group", mention=True)

    first, second = await inbox.next(), await inbox.next()
    assert (first.text, first.mentioned) == ("summarize", True)
    assert second.text == "after"
    assert inbox.queue.empty()


async def test_redelivered_event_is_passed_on_with_the_same_message_id(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running

    ts = await harness.inject_message("once", chat_type="group", mention=True)
    await harness.inject_message("once", chat_type="group", mention=True, message_id=ts)

    assert [(await inbox.next()).message_id, (await inbox.next()).message_id] == [ts, ts]


async def test_own_and_other_bot_messages_never_reach_on_message(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running

    await harness.inject_message("echo", chat_type="group", from_self=True)
    await harness.inject_message("beep", chat_type="group", sender_id="U0HELPER", from_bot=True)
    await harness.inject_message("human", chat_type="group")

    assert (await inbox.next()).text == "human"


async def test_malformed_event_on_the_wire_is_skipped_and_intake_continues(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running

    await harness.deliver_raw({"type": "message", "channel": "C0GENERAL", "ts": 5, "user": []})
    await harness.inject_message("still here")

    assert (await inbox.next()).text == "still here"


async def test_unrelated_events_are_acknowledged_and_ignored(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running

    await harness.deliver_raw({"type": "reaction_added", "user": "U1001", "reaction": "eyes"})
    await harness.inject_message("next")

    assert (await inbox.next()).text == "next"


async def test_stop_called_from_the_callback_returns_promptly(harness: SlackHarness) -> None:
    adapter = harness.make_adapter()
    stopped = asyncio.Event()

    async def stop_on_message(message: InboundMessage) -> None:
        await adapter.stop()
        stopped.set()

    await adapter.start(stop_on_message)
    await harness.inject_message("/quit", wait=False)

    async with asyncio.timeout(3):
        await stopped.wait()


async def test_a_message_the_callback_fails_on_is_not_acked_and_slack_delivers_it_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = SlackHarness(ack_timeout=1.0)
    await harness.start()
    adapter = harness.make_adapter()
    inbox = Inbox()
    calls = 0

    async def flaky(message: InboundMessage) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the store is read-only")
        await inbox(message)

    await adapter.start(flaky)
    try:
        with caplog.at_level(logging.ERROR, logger="adapters.slack"):
            await harness.inject_message("first")
            await harness.inject_message("second")
        texts = [(await inbox.next()).text, (await inbox.next()).text]
        [delivery, _] = harness.standin.sender.deliveries
    finally:
        await adapter.stop()
        await harness.stop()

    assert texts == ["first", "second"]
    assert [a.outcome for a in delivery.attempts] == ["timeout", "acked"]
    assert "left unacknowledged, so Slack will deliver it again" in caplog.text


async def test_long_reply_arrives_as_ordered_parts_each_within_the_limit(
    harness: SlackHarness, running: Running
) -> None:
    adapter, _ = running
    code = "\n".join(f"value_{i} = {i}" for i in range(400))
    text = "Here you go:\n\n" + "word " * 700 + f"\n\n```python\n{code}\n```\n\nThat is all."

    sent = await adapter.send(OutboundMessage(channel="slack", chat_id="C0GENERAL", text=text))

    records = await harness.wait_sent(len(sent))
    assert len(records) == len(sent) > 2
    assert [r.message_id for r in records] == [s.message_id for s in sent]
    assert all(len(r.text) <= 4000 and r.formatted for r in records)
    assert all(r.text.count("```") % 2 == 0 for r in records)
    joined = "".join(r.text for r in records)
    assert joined.index("Here you go") < joined.index("value_0 =") < joined.index("value_399 =")
    assert joined.rstrip().endswith("That is all.")


async def test_rejected_formatting_is_resent_as_plain_text(
    harness: SlackHarness, running: Running
) -> None:
    adapter, _ = running
    harness.reject_formatting_next()

    await adapter.send(OutboundMessage(channel="slack", chat_id="C0GENERAL", text="**hi** there"))

    [record] = await harness.wait_sent(1)
    assert (record.text, record.formatted) == ("hi there", False)


async def test_a_rate_limited_send_raises_rate_limited_with_slacks_retry_after(
    harness: SlackHarness, running: Running
) -> None:
    """Nothing was posted, so the chat's pacer may send it again once the wait is over."""
    adapter, _ = running
    harness.fail_next_sends(1, status=429, retry_after=3)

    with pytest.raises(RateLimitedError) as refused:
        await adapter.send(OutboundMessage(channel="slack", chat_id="C0GENERAL", text="hi"))

    assert refused.value.retry_after == 3.0
    assert harness.sent() == []


async def test_endless_rate_limit_raises_delivery_error_naming_the_chat(
    harness: SlackHarness, running: Running
) -> None:
    adapter, _ = running
    harness.fail_next_sends(10, status=429, retry_after=0)

    with pytest.raises(DeliveryError) as caught:
        await adapter.send(OutboundMessage(channel="slack", chat_id="C0GENERAL", text="hi"))

    assert "C0GENERAL" in str(caught.value) and BOT_TOKEN not in str(caught.value)
    assert harness.sent() == []


async def test_unknown_channel_raises_delivery_error_without_the_token(
    harness: SlackHarness, running: Running
) -> None:
    adapter, _ = running

    with pytest.raises(DeliveryError) as caught:
        await adapter.send(OutboundMessage(channel="slack", chat_id="", text="hi"))

    assert "channel_not_found" in str(caught.value) and BOT_TOKEN not in str(caught.value)


async def test_reply_to_a_thread_message_lands_in_that_thread(
    harness: SlackHarness, running: Running
) -> None:
    adapter, inbox = running
    await harness.inject_message("in thread", chat_type="group", thread_id="1700000000.000009")
    inbound = await inbox.next()

    await adapter.send(
        OutboundMessage(
            channel="slack",
            chat_id=inbound.chat_id,
            thread_id=inbound.thread_id,
            reply_to_message_id=inbound.message_id,
            text="answer",
        )
    )

    [record] = await harness.wait_sent(1)
    assert (record.chat_id, record.thread_id) == ("C0GENERAL", "1700000000.000009")


async def test_reply_to_bot_in_its_thread_is_received_as_mentioned(
    harness: SlackHarness, running: Running
) -> None:
    adapter, inbox = running
    [bot_msg] = await adapter.send(OutboundMessage(channel="slack", chat_id="C0GENERAL", text="hi"))

    await harness.inject_message("thanks", chat_type="group", reply_to_bot=True)

    inbound = await inbox.next()
    assert inbound.mentioned is True and inbound.thread_id == bot_msg.message_id
    assert inbound.reply_to is not None and inbound.reply_to.from_bot is True


async def test_typing_indicator_is_a_no_op_because_slack_bots_have_none(
    harness: SlackHarness, running: Running
) -> None:
    adapter, _ = running
    calls_before = len(harness.standin.api_calls)

    await adapter.send_typing("C0GENERAL", "1700000000.000009")

    assert harness.typing_events() == []
    assert len(harness.standin.api_calls) == calls_before


async def test_attachment_is_fetched_with_the_bot_token_under_the_cap(
    harness: SlackHarness, running: Running
) -> None:
    adapter, inbox = running
    file = harness.standin.add_file("notes.txt", b"twelve bytes")
    await harness.inject_message("see file", files=[file])
    [attachment] = (await inbox.next()).attachments

    data = await adapter.fetch_attachment(attachment, max_bytes=100)

    assert data == b"twelve bytes"


async def test_attachment_over_the_cap_is_refused(harness: SlackHarness, running: Running) -> None:
    adapter, inbox = running
    file = harness.standin.add_file("big.bin", b"x" * 5000, "application/octet-stream")
    await harness.inject_message("", files=[file])
    [attachment] = (await inbox.next()).attachments
    unsized = attachment.model_copy(update={"size": None})

    with pytest.raises(InputError, match="limit"):
        await adapter.fetch_attachment(attachment, max_bytes=1000)
    with pytest.raises(InputError, match="limit"):
        await adapter.fetch_attachment(unsized, max_bytes=1000)


async def test_stop_returns_promptly_and_is_idempotent(harness: SlackHarness) -> None:
    adapter = harness.make_adapter()
    await adapter.start(Inbox())
    await harness.standin.wait_connected()

    async with asyncio.timeout(3):
        await adapter.stop()
        await adapter.stop()

    assert [ws for ws in harness.standin._sockets if not ws.closed] == []


async def test_socket_mode_reconnects_after_the_connection_drops(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running
    await harness.standin.wait_connected()

    await harness.standin.drop_connections()
    await harness.inject_message("after reconnect")

    assert (await inbox.next()).text == "after reconnect"
    assert harness.standin.connections_opened == 2


async def test_bad_bot_token_fails_start_with_a_clear_error_without_the_token(
    harness: SlackHarness,
) -> None:
    adapter = harness.make_adapter(slack_bot_token="xoxb-wrong-secret-value")

    with pytest.raises(ConfigError) as caught:
        await adapter.start(Inbox())

    assert "invalid_auth" in str(caught.value) and "wrong-secret" not in str(caught.value)


async def test_bad_app_token_fails_start_with_a_clear_error(harness: SlackHarness) -> None:
    adapter = harness.make_adapter(slack_app_token="xapp-wrong-secret-value")

    with pytest.raises(ConfigError, match="app-level token"):
        await adapter.start(Inbox())


# -- HTTP Events API mode ----------------------------------------------------------------------


async def test_http_mode_receives_a_signed_mention_once(http_harness: SlackHarness) -> None:
    adapter = http_harness.make_adapter()
    inbox = Inbox()
    await adapter.start(inbox)
    try:
        ts = await http_harness.inject_message("hello", chat_type="group", mention=True)
        await http_harness.inject_message("next", chat_type="group")

        first, second = await inbox.next(), await inbox.next()
        assert (first.text, first.mentioned, first.message_id) == ("hello", True, ts)
        assert second.text == "next" and inbox.queue.empty()
    finally:
        await adapter.stop()


async def test_http_mode_rejects_a_bad_signature_with_401(http_harness: SlackHarness) -> None:
    adapter = http_harness.make_adapter()
    inbox = Inbox()
    await adapter.start(inbox)
    try:
        body = {"type": "event_callback", "event": message_event(channel_type="im")}
        status, _ = await http_harness.post_signed(body, secret="not-the-secret")
        assert status == 401
        assert inbox.queue.empty()
    finally:
        await adapter.stop()


async def test_http_mode_answers_url_verification(http_harness: SlackHarness) -> None:
    adapter = http_harness.make_adapter()
    await adapter.start(Inbox())
    try:
        body = {"type": "url_verification", "token": "t", "challenge": "c-123"}
        status, text = await http_harness.post_signed(body)
        assert status == 200 and "c-123" in text
    finally:
        await adapter.stop()


async def test_http_mode_stop_closes_the_endpoint(http_harness: SlackHarness) -> None:
    adapter = http_harness.make_adapter()
    await adapter.start(Inbox())

    async with asyncio.timeout(3):
        await adapter.stop()
        await adapter.stop()

    with pytest.raises(OSError):
        await http_harness.post_signed({"type": "url_verification", "challenge": "x"})


# -- acknowledgement follows storage ------------------------------------------------------------


class HeldInbox(Inbox):
    """An on_message that holds each message until released, like a slow store."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, message: InboundMessage) -> None:
        self.entered.set()
        await asyncio.wait_for(self.release.wait(), WAIT)
        await super().__call__(message)


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_an_event_is_acked_only_after_on_message_returned(
    mode: Literal["socket", "http"],
) -> None:
    harness = SlackHarness(mode)
    await harness.start()
    adapter = harness.make_adapter()
    inbox = HeldInbox()
    await adapter.start(inbox)
    try:
        await harness.inject_message("keep this", wait=False)
        [delivery] = harness.standin.sender.deliveries
        await asyncio.wait_for(inbox.entered.wait(), WAIT)
        acked_while_storing = delivery.acked or delivery.response is not None
        inbox.release.set()
        await delivery.wait(WAIT)
    finally:
        await adapter.stop()
        await harness.stop()

    assert acked_while_storing is False
    assert [a.outcome for a in delivery.attempts] == ["acked"]


async def test_events_that_are_not_messages_for_the_bot_are_acked_without_on_message(
    harness: SlackHarness,
) -> None:
    adapter = harness.make_adapter()
    inbox = HeldInbox()  # would hold anything that reached it
    await adapter.start(inbox)
    try:
        reaction = await harness.deliver_raw({"type": "reaction_added", "reaction": "eyes"})
        edit = await harness.deliver_raw(message_event(subtype="message_changed"))
    finally:
        await adapter.stop()

    assert reaction.acked and edit.acked and not inbox.entered.is_set()


# -- people's names ------------------------------------------------------------------------------


async def test_the_senders_name_comes_from_users_info_once_for_many_messages(
    harness: SlackHarness, running: Running
) -> None:
    _, inbox = running
    harness.standin.add_user("U0ANN", "Ann Lee", display_name="")

    await harness.inject_message("one", sender_id="U0ANN")
    await harness.inject_message("two", sender_id="U0ANN")

    names = [(await inbox.next()).sender_name, (await inbox.next()).sender_name]
    assert names == ["Ann Lee", "Ann Lee"]
    assert harness.standin.users_info_calls() == ["U0ANN"]


async def test_a_failed_name_lookup_shows_the_id_and_the_message_still_arrives(
    harness: SlackHarness, running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    _, inbox = running
    harness.standin.users_info_error = "missing_scope"

    with caplog.at_level(logging.WARNING, logger="adapters.slack"):
        await harness.inject_message("hi", sender_id="U0333")
        await harness.inject_message("again", sender_id="U0333")

    first, second = await inbox.next(), await inbox.next()
    assert (first.sender_id, first.sender_name, second.text) == ("U0333", "", "again")
    assert harness.standin.users_info_calls() == ["U0333"]  # the failure is remembered
    assert "users:read" in caplog.text and BOT_TOKEN not in caplog.text


async def test_a_cached_name_expires_and_the_cache_stays_bounded(harness: SlackHarness) -> None:
    for user_id, name in [("U1", "One"), ("U2", "Two"), ("U3", "Three")]:
        harness.standin.add_user(user_id, name)
    now = [0.0]
    client = AsyncWebClient(token=BOT_TOKEN, base_url=harness.standin.api_base)
    directory = UserDirectory(client, max_entries=2, ttl=60, clock=lambda: now[0])

    names = [await directory.name(user) for user in ("U1", "U1", "U2", "U3")]
    harness.standin.add_user("U3", "Three, renamed")
    now[0] = 61
    renamed = await directory.name("U3")

    assert names == ["One", "One", "Two", "Three"]
    assert renamed == "Three, renamed"
    assert len(directory) == 2
    assert harness.standin.users_info_calls() == ["U1", "U2", "U3", "U3"]


# -- the slash command ---------------------------------------------------------------------------


def test_slash_command_text_names_the_clawbot_command() -> None:
    payload = {
        "command": "/clawbot",
        "text": " model  openai/gpt-4o ",
        "channel_id": "C0GENERAL",
        "user_id": "U1001",
        "user_name": "ann",
        "trigger_id": "1.2.abc",
    }

    inbound = command_to_inbound(payload)
    bare = command_to_inbound({**payload, "text": "", "channel_id": "D0ANN"})

    assert inbound is not None and bare is not None
    assert (inbound.text, inbound.chat_type, inbound.message_id) == (
        "/model  openai/gpt-4o",
        "group",
        "1.2.abc",
    )
    assert (bare.text, bare.chat_type) == ("/help", "dm")
    assert command_to_inbound({**payload, "user_id": ""}) is None


@pytest.mark.parametrize("name", ["clawbot", "/Clawbot", "/claw bot", "/" + "x" * 32])
def test_a_slash_command_name_slack_would_refuse_is_a_settings_problem(name: str) -> None:
    settings = make_settings(
        slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN, slack_command=name
    )

    assert any("CLAWBOT_SLACK_COMMAND" in p for p in SlackAdapter.check_settings(settings))


# -- requests a person waits on: told, not only logged ------------------------------------------


async def fail_to_take_in(message: InboundMessage) -> None:
    raise RuntimeError("the store is read-only")


async def test_a_slash_command_that_could_not_be_taken_in_is_answered_to_the_person_alone(
    harness: SlackHarness,
) -> None:
    adapter = harness.make_adapter()
    await adapter.start(fail_to_take_in)
    try:
        await harness.slash_command("status", chat_type="group")
        [answer] = await harness.standin.wait_responses(1, WAIT)
    finally:
        await adapter.stop()

    assert (answer["text"], answer["response_type"]) == (NOT_TAKEN_IN, "ephemeral")


async def test_a_button_press_that_could_not_be_taken_in_is_answered_to_the_presser_alone(
    harness: SlackHarness,
) -> None:
    adapter = harness.make_adapter()
    await adapter.start(fail_to_take_in)
    try:
        question = OutboundMessage(
            channel="slack",
            chat_id="C0GENERAL",
            text="Run it?",
            actions=(Action(label="Deny", command="/deny k7m2pq"),),
        )
        await adapter.send(question)
        [record] = harness.sent()
        await harness.press(record, "Deny")
        [answer] = await harness.standin.wait_responses(1, WAIT)
    finally:
        await adapter.stop()

    assert (answer["text"], answer["response_type"]) == (NOT_TAKEN_IN, "ephemeral")
    assert answer["replace_original"] is False  # the question and its buttons stay


async def test_a_button_pressed_while_clawbot_stops_is_answered_with_restarting(
    harness: SlackHarness,
) -> None:
    inflight: set[asyncio.Task[Any]] = set()
    stopping = Interactions(taking=lambda: None, named=_unnamed, inflight=inflight)
    respond = AsyncRespond(response_url=f"{harness.standin.base_url}/actions/R1")

    ack = AsyncAck()  # type: ignore[no-untyped-call]
    await stopping.on_press(ack, {"type": "block_actions"}, respond)
    [answer] = await harness.standin.wait_responses(1, WAIT)

    assert (answer["text"], answer["response_type"]) == (RESTARTING, "ephemeral")


async def _unnamed(inbound: InboundMessage) -> InboundMessage:
    return inbound
