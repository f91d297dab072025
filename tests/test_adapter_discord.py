"""The Discord adapter: pure conversions, then the real discord.py against the local stand-in."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import discord
import pytest
from discord.gateway import DiscordWebSocket
from discord.http import Route
from pydantic import SecretStr

from adapters.discord.adapter import DiscordAdapter
from adapters.discord.catch_up import TRACKED_CHATS, CatchUp
from adapters.discord.inbound import inbound_from_message
from adapters.discord.sending import outbound_arguments
from clawbot.app import Clawbot
from clawbot.channels.interface import NOT_TAKEN_IN, Adapter, ChatCursor
from clawbot.channels.rendering import RenderedPart
from clawbot.cli.service import Service
from clawbot.errors import ConfigError, DeliveryError, InputError
from clawbot.messages import Action, InboundMessage, OutboundMessage
from clawbot.settings import Settings
from clawbot.testing import ModelRequest, ScriptedModel
from tests.standins.discord import (
    BOT_TOKEN,
    BOT_USER_ID,
    GENERAL_CHANNEL_ID,
    NEWS_CHANNEL_ID,
    DiscordHarness,
)

BOT_ID = int(BOT_USER_ID)


@pytest.fixture
async def harness() -> AsyncIterator[DiscordHarness]:
    h = DiscordHarness()
    await h.start()
    yield h
    await h.stop()


class Running:
    """An adapter started against the stand-in, with what it handed to on_message."""

    def __init__(self, harness: DiscordHarness, adapter: Adapter) -> None:
        self.harness = harness
        self.adapter = adapter
        self.inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()

    async def next(self) -> InboundMessage:
        return await asyncio.wait_for(self.inbox.get(), timeout=5.0)


@pytest.fixture
async def running(harness: DiscordHarness) -> AsyncIterator[Running]:
    run = Running(harness, harness.make_adapter())
    await run.adapter.start(run.inbox.put)
    yield run
    await run.adapter.stop()


def convert(harness: DiscordHarness, text: str, **options: Any) -> InboundMessage | None:
    ignore_other_bots = options.pop("ignore_other_bots", True)
    payload, _ = harness.compose_message(text, **options)
    message = harness.library_message(payload)
    return inbound_from_message(message, bot_user_id=BOT_ID, ignore_other_bots=ignore_other_bots)


def part(text: str, plain: str | None = None) -> RenderedPart:
    return RenderedPart(
        text=text, plain=text if plain is None else plain, markup="discord_markdown"
    )


def outbound(chat_id: str, text: str, **fields: Any) -> OutboundMessage:
    return OutboundMessage(channel="discord", chat_id=chat_id, text=text, **fields)


# ---- inbound conversion ----------------------------------------------------------------------


def test_dm_becomes_a_dm_from_its_sender() -> None:
    harness = DiscordHarness()
    inbound = convert(harness, "hello", sender_id="1001", sender_name="Ann", message_id="555")
    assert inbound is not None
    assert inbound.channel == "discord"
    assert inbound.chat_type == "dm"
    assert inbound.thread_id is None
    assert (inbound.sender_id, inbound.sender_name) == ("1001", "Ann")
    assert inbound.text == "hello"
    assert inbound.message_id == "555"
    assert inbound.mentioned is False


def test_group_message_without_mention_is_not_mentioned() -> None:
    inbound = convert(DiscordHarness(), "just chatting", chat_type="group")
    assert inbound is not None
    assert (inbound.chat_type, inbound.chat_id) == ("group", GENERAL_CHANNEL_ID)
    assert inbound.mentioned is False
    assert inbound.text == "just chatting"


def test_group_mention_marks_mentioned_and_is_stripped_from_text() -> None:
    inbound = convert(DiscordHarness(), "what time is it?", chat_type="group", mention=True)
    assert inbound is not None
    assert inbound.mentioned is True
    assert inbound.text == "what time is it?"


def test_nickname_style_mention_in_mid_sentence_is_stripped() -> None:
    harness = DiscordHarness()
    payload, _ = harness.compose_message(f"hey <@!{BOT_USER_ID}> help me", chat_type="group")
    inbound = inbound_from_message(harness.library_message(payload), bot_user_id=BOT_ID)
    assert inbound is not None
    assert inbound.mentioned is True
    assert inbound.text == "hey help me"


def test_thread_message_belongs_to_parent_channel_with_thread_id() -> None:
    inbound = convert(DiscordHarness(), "in a thread", chat_type="group", thread_id="4242")
    assert inbound is not None
    assert (inbound.chat_type, inbound.chat_id, inbound.thread_id) == (
        "group",
        GENERAL_CHANNEL_ID,
        "4242",
    )


def test_announcement_channel_post_is_a_channel_message() -> None:
    inbound = convert(DiscordHarness(), "release notes", chat_type="group", chat_id=NEWS_CHANNEL_ID)
    assert inbound is not None
    assert (inbound.chat_type, inbound.chat_id) == ("channel", NEWS_CHANNEL_ID)


def test_reply_to_the_bot_counts_as_mention_and_keeps_the_replied_message() -> None:
    inbound = convert(DiscordHarness(), "and tomorrow?", chat_type="group", reply_to_bot=True)
    assert inbound is not None
    assert inbound.mentioned is True
    assert inbound.reply_to is not None
    assert inbound.reply_to.text == "Earlier answer"
    assert inbound.reply_to.sender_name == "Claw Bot"
    assert inbound.reply_to.from_bot is True


def test_attachments_are_described_not_downloaded() -> None:
    harness = DiscordHarness()
    file = harness.add_file("report.pdf", b"%PDF-1.7 ...", "application/pdf")
    inbound = convert(harness, "see attached", attachments=[file])
    assert inbound is not None
    (attachment,) = inbound.attachments
    assert (attachment.name, attachment.mime_type, attachment.size) == (
        "report.pdf",
        "application/pdf",
        12,
    )
    assert attachment.ref == file["url"]


def test_attachment_alone_is_usable_without_text() -> None:
    harness = DiscordHarness()
    file = harness.add_file("photo.png", b"\x89PNG", "image/png")
    inbound = convert(harness, "", attachments=[file])
    assert inbound is not None
    assert inbound.text == ""
    assert inbound.attachments[0].name == "photo.png"


def test_own_message_is_ignored() -> None:
    assert convert(DiscordHarness(), "my own words", chat_type="group", from_self=True) is None


def test_other_bot_is_ignored_by_default() -> None:
    assert convert(DiscordHarness(), "beep", chat_type="group", from_bot=True) is None


def test_other_bot_is_heard_when_ignore_other_bots_is_off() -> None:
    inbound = convert(
        DiscordHarness(), "beep", chat_type="group", from_bot=True, ignore_other_bots=False
    )
    assert inbound is not None
    assert inbound.text == "beep"


def test_mention_with_nothing_else_is_not_usable() -> None:
    assert convert(DiscordHarness(), "", chat_type="group", mention=True) is None


def test_malformed_update_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    harness = DiscordHarness()
    payload, _ = harness.compose_message("no author")
    del payload["author"]
    with caplog.at_level(logging.WARNING, logger="adapters.discord"):
        result = inbound_from_message(harness.library_message(payload), bot_user_id=BOT_ID)
    assert result is None
    assert "malformed" in caplog.text
    assert BOT_TOKEN not in caplog.text


# ---- outbound conversion ---------------------------------------------------------------------


def test_outbound_part_replies_to_the_given_message() -> None:
    arguments = outbound_arguments(part("**hi**"), channel_id=10, reply_to_message_id="77")
    assert arguments["content"] == "**hi**"
    assert arguments["reference"].message_id == 77
    assert arguments["reference"].fail_if_not_exists is False
    assert arguments["allowed_mentions"].everyone is False


def test_outbound_plain_fallback_shows_markdown_characters_literally() -> None:
    arguments = outbound_arguments(part("**2*3**", plain="2*3"), channel_id=10, as_plain=True)
    assert arguments["content"] == "2\\*3"
    assert "reference" not in arguments


# ---- settings --------------------------------------------------------------------------------


def test_valid_token_has_no_problems() -> None:
    settings = Settings(_env_file=None, discord_token=SecretStr(BOT_TOKEN))  # type: ignore[call-arg]
    assert DiscordAdapter.is_configured(settings)
    assert DiscordAdapter.check_settings(settings) == []


@pytest.mark.parametrize(
    ("token", "complaint"),
    [
        (None, "not set"),
        ("Bot " + BOT_TOKEN, "without a 'Bot ' prefix"),
        ("1234567890abcdef1234567890abcdef", "does not look like a bot token"),
        ('"' + BOT_TOKEN + '"', "spaces or quotes"),
    ],
)
def test_bad_token_is_reported_without_revealing_it(token: str | None, complaint: str) -> None:
    secret = SecretStr(token) if token is not None else None
    settings = Settings(_env_file=None, discord_token=secret)  # type: ignore[call-arg]
    problems = DiscordAdapter.check_settings(settings)
    assert len(problems) == 1
    assert complaint in problems[0]
    if token:
        assert BOT_TOKEN not in problems[0]
        with pytest.raises(ConfigError) as raised:
            DiscordAdapter.from_settings(settings)
        assert BOT_TOKEN not in str(raised.value)


def test_adapter_repr_hides_the_token() -> None:
    adapter = DiscordAdapter(SecretStr(BOT_TOKEN))
    assert BOT_TOKEN not in repr(adapter)
    assert BOT_TOKEN not in repr(vars(adapter))


# ---- end to end: discord.py against the stand-in ---------------------------------------------


async def test_dm_reaches_on_message_normalized(running: Running) -> None:
    message_id = await running.harness.inject_message("hello bot", sender_id="1001")
    inbound = await running.next()
    assert inbound.chat_type == "dm"
    assert inbound.sender_id == "1001"
    assert inbound.text == "hello bot"
    assert inbound.message_id == message_id


async def test_client_identifies_with_only_the_needed_intents(running: Running) -> None:
    (identify,) = running.harness.server.identify_payloads
    guilds, guild_messages, dm_messages, message_content = 1 << 0, 1 << 9, 1 << 12, 1 << 15
    assert identify["intents"] == guilds | guild_messages | dm_messages | message_content


async def test_redelivered_message_keeps_its_message_id(running: Running) -> None:
    first = await running.harness.inject_message("once", message_id="9001")
    again = await running.harness.inject_message("once", message_id="9001")
    assert first == again == "9001"
    assert (await running.next()).message_id == "9001"
    assert (await running.next()).message_id == "9001"


async def test_ignored_messages_never_reach_on_message(running: Running) -> None:
    await running.harness.inject_message("me", chat_type="group", from_self=True)
    await running.harness.inject_message("other bot", chat_type="group", from_bot=True)
    await running.harness.inject_message("a person")
    assert (await running.next()).text == "a person"
    assert running.inbox.empty()


async def test_long_reply_arrives_in_order_each_part_within_the_limit(running: Running) -> None:
    prose = "\n\n".join(f"Paragraph {n} " + "words " * 40 for n in range(7))
    code = "\n".join(f"line_{n} = {n}  # a comment to make it long" for n in range(60))
    text = f"{prose}\n\n```python\n{code}\n```\n\nThe end."
    sent = await running.adapter.send(outbound(GENERAL_CHANNEL_ID, text))
    records = running.harness.sent()
    assert len(records) == len(sent) > 2
    assert [r.message_id for r in records] == [s.message_id for s in sent]
    assert all(len(r.text) <= 2000 for r in records)
    assert all(r.text.count("```") % 2 == 0 for r in records)  # fences closed in every part
    joined = "".join(r.text for r in records)
    assert joined.index("Paragraph 0") < joined.index("line_0 =") < joined.index("line_59 =")
    assert joined.index("line_59 =") < joined.index("The end.")


async def test_rejected_formatting_is_resent_as_plain_text(running: Running) -> None:
    running.harness.reject_formatting_next()
    sent = await running.adapter.send(outbound(GENERAL_CHANNEL_ID, "**Bold** claim with `code`"))
    (record,) = running.harness.sent()
    assert len(sent) == 1
    assert record.formatted is False
    assert "Bold claim with code" in record.text
    posts = [r for r in running.harness.server.requests if r[0] == "POST" and "messages" in r[1]]
    assert len(posts) == 2


async def test_rate_limited_send_is_retried_and_stored_once(running: Running) -> None:
    running.harness.fail_next_sends(1, retry_after=0)
    sent = await running.adapter.send(outbound(GENERAL_CHANNEL_ID, "after the wait"))
    records = running.harness.sent()
    assert [r.text for r in records] == ["after the wait"]
    assert sent[0].message_id == records[0].message_id


async def test_rate_limit_outlasting_the_library_retries_still_stores_once(
    running: Running,
) -> None:
    running.harness.fail_next_sends(7, retry_after=0)  # discord.py gives up after 5 tries
    await running.adapter.send(outbound(GENERAL_CHANNEL_ID, "persistent"))
    assert [r.text for r in running.harness.sent()] == ["persistent"]


async def test_an_answer_sent_again_under_its_key_shows_once(running: Running) -> None:
    """Recovery sends an answer again when it cannot know whether Discord took it (a crash
    between the POST and the record of it): under the same key, each part's nonce makes
    Discord return the message it created instead of posting another."""
    text = "\n\n".join(f"Paragraph {n} " + "words " * 60 for n in range(12))
    answer = outbound(GENERAL_CHANNEL_ID, text, idempotency_key="turn_0001")

    first = await running.adapter.send(answer)
    again = await running.adapter.send(answer)

    assert len(first) > 1
    assert again == first
    assert [r.message_id for r in running.harness.sent()] == [s.message_id for s in first]


async def test_answers_under_other_keys_or_none_are_each_shown(running: Running) -> None:
    for key in ("turn_0001", "turn_0002", None, None):
        await running.adapter.send(outbound(GENERAL_CHANNEL_ID, "ok", idempotency_key=key))

    assert [r.text for r in running.harness.sent()] == ["ok"] * 4


async def test_endless_rate_limit_raises_delivery_error_naming_the_chat(
    running: Running,
) -> None:
    running.harness.fail_next_sends(100, retry_after=0)
    with pytest.raises(DeliveryError) as raised:
        await running.adapter.send(outbound(GENERAL_CHANNEL_ID, "never"))
    assert GENERAL_CHANNEL_ID in str(raised.value)
    assert BOT_TOKEN not in str(raised.value)
    assert running.harness.sent() == []


async def test_refused_send_raises_delivery_error_naming_the_chat(running: Running) -> None:
    running.harness.fail_next_sends(1, status=403)
    with pytest.raises(DeliveryError) as raised:
        await running.adapter.send(outbound(GENERAL_CHANNEL_ID, "forbidden"))
    assert GENERAL_CHANNEL_ID in str(raised.value)
    assert BOT_TOKEN not in str(raised.value)


async def test_reply_lands_in_the_thread_as_a_reply(running: Running) -> None:
    await running.harness.inject_message("help", chat_type="group", mention=True, thread_id="77")
    inbound = await running.next()
    await running.adapter.send(
        outbound(
            inbound.chat_id,
            "Here you go",
            thread_id=inbound.thread_id,
            reply_to_message_id=inbound.message_id,
        )
    )
    (record,) = running.harness.sent()
    assert (record.chat_id, record.thread_id) == (GENERAL_CHANNEL_ID, "77")
    assert record.raw["message_reference"]["message_id"] == inbound.message_id


async def test_reply_to_the_bots_answer_is_a_mention(running: Running) -> None:
    await running.adapter.send(outbound(GENERAL_CHANNEL_ID, "first answer"))
    await running.harness.inject_message("follow-up", chat_type="group", reply_to_bot=True)
    inbound = await running.next()
    assert inbound.mentioned is True
    assert inbound.reply_to is not None
    assert inbound.reply_to.text == "first answer"


async def test_typing_indicator_reaches_the_chat(running: Running) -> None:
    await running.harness.inject_message("hi", chat_type="group", mention=True, thread_id="88")
    inbound = await running.next()
    await running.adapter.send_typing(inbound.chat_id, inbound.thread_id)
    await running.adapter.send_typing("404404")  # unknown channel: logged, not raised
    assert running.harness.typing_events() == [GENERAL_CHANNEL_ID]
    assert running.harness.server.typing == ["88"]


async def test_attachment_is_fetched_under_the_cap(running: Running) -> None:
    file = running.harness.add_file("notes.txt", b"remember the milk", "text/plain; charset=utf-8")
    await running.harness.inject_message("see file", attachments=[file])
    inbound = await running.next()
    (attachment,) = inbound.attachments
    assert attachment.mime_type == "text/plain"
    assert (
        await running.adapter.fetch_attachment(attachment, max_bytes=1000) == b"remember the milk"
    )


async def test_attachment_over_the_cap_is_refused(running: Running) -> None:
    file = running.harness.add_file("big.bin", b"x" * 5000)
    await running.harness.inject_message("big one", attachments=[file])
    (attachment,) = (await running.next()).attachments
    with pytest.raises(InputError, match="larger than the 1000-byte limit"):
        await running.adapter.fetch_attachment(attachment, max_bytes=1000)


async def test_attachment_understating_its_size_is_refused_while_downloading(
    running: Running,
) -> None:
    file = running.harness.add_file("liar.bin", b"x" * 5000, declared_size=10)
    await running.harness.inject_message("small, honest", attachments=[file])
    (attachment,) = (await running.next()).attachments
    assert attachment.size == 10
    with pytest.raises(InputError, match="limit"):
        await running.adapter.fetch_attachment(attachment, max_bytes=1000)


async def test_handler_failure_does_not_stop_intake(harness: DiscordHarness) -> None:
    seen: list[str] = []
    survived = asyncio.Event()

    async def flaky(message: InboundMessage) -> None:
        seen.append(message.text)
        if message.text == "boom":
            raise RuntimeError("handler bug")
        survived.set()

    adapter = harness.make_adapter()
    await adapter.start(flaky)
    try:
        await harness.inject_message("boom")
        await harness.inject_message("still here")
        await asyncio.wait_for(survived.wait(), 5.0)
    finally:
        await adapter.stop()
    assert seen == ["boom", "still here"]


async def failing_handler(message: InboundMessage) -> None:
    raise RuntimeError("the store is read-only")


async def test_a_message_the_handler_failed_on_is_answered_with_a_notice(
    harness: DiscordHarness,
) -> None:
    adapter = harness.make_adapter()
    await adapter.start(failing_handler)
    try:
        message_id = await harness.inject_message("are you there?", chat_type="group", mention=True)
        [notice] = await harness.wait_sent(1)
    finally:
        await adapter.stop()

    assert (notice.chat_id, notice.text) == (GENERAL_CHANNEL_ID, NOT_TAKEN_IN)
    assert notice.raw["message_reference"]["message_id"] == message_id


async def test_a_button_press_the_handler_failed_on_is_answered_with_a_notice(
    harness: DiscordHarness,
) -> None:
    adapter = harness.make_adapter()
    await adapter.start(failing_handler)
    try:
        deny = Action(label="Deny", command="/deny k7m2pq")
        await adapter.send(outbound(GENERAL_CHANNEL_ID, "Run it?", actions=(deny,)))
        [question] = harness.sent()
        await harness.press(question, "Deny")
        [_, notice] = await harness.wait_sent(2)
    finally:
        await adapter.stop()

    assert (notice.chat_id, notice.text) == (GENERAL_CHANNEL_ID, NOT_TAKEN_IN)


async def test_malformed_gateway_update_does_not_break_the_connection(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    payload, _ = running.harness.compose_message("no content field")
    del payload["content"]
    with caplog.at_level(logging.WARNING, logger="adapters.discord"):
        await running.harness.server.dispatch("MESSAGE_CREATE", payload)
        await running.harness.inject_message("next one")
        assert (await running.next()).text == "next one"
    assert "malformed MESSAGE_CREATE" in caplog.text


async def test_gateway_drop_is_resumed_without_losing_messages(running: Running) -> None:
    server = running.harness.server
    await server.drop_gateway()
    await running.harness.inject_message("after the outage")
    assert (await running.next()).text == "after the outage"
    assert len(server.resumes) == 1
    assert len(server.identify_payloads) == 1


async def test_stop_returns_promptly_and_is_idempotent(harness: DiscordHarness) -> None:
    adapter = harness.make_adapter()
    await adapter.start(asyncio.Queue[InboundMessage]().put)
    await asyncio.wait_for(adapter.stop(), timeout=3.0)
    await asyncio.wait_for(adapter.stop(), timeout=3.0)
    assert not harness.server.connected.is_set()
    with pytest.raises(DeliveryError):
        await adapter.send(outbound(GENERAL_CHANNEL_ID, "too late"))


async def test_stop_restores_the_library_endpoints(harness: DiscordHarness) -> None:
    before = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    adapter = harness.make_adapter()
    await adapter.start(asyncio.Queue[InboundMessage]().put)
    assert harness.server.api_base == Route.BASE
    await adapter.stop()
    assert before == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)


async def test_rejected_token_fails_start_with_config_error(harness: DiscordHarness) -> None:
    other = BOT_TOKEN.replace("in-only", "wrong-xx")
    adapter = harness.make_adapter(discord_token=other)
    with pytest.raises(ConfigError) as raised:
        await adapter.start(asyncio.Queue[InboundMessage]().put)
    assert other not in str(raised.value)
    assert Route.BASE == "https://discord.com/api/v10"


async def test_token_never_reaches_the_logs(
    harness: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()
    adapter = harness.make_adapter()
    with caplog.at_level(logging.DEBUG):
        await adapter.start(inbox.put)
        await harness.inject_message("hi")
        await asyncio.wait_for(inbox.get(), 5.0)
        harness.fail_next_sends(1, retry_after=0)
        await adapter.send(outbound(GENERAL_CHANNEL_ID, "**hello**"))
        await adapter.stop()
    assert "IDENTIFY" in caplog.text  # the gateway handshake was logged at debug level
    assert BOT_TOKEN not in caplog.text


# ---- catching up on what was posted while no session was connected -------------------------


def cursor(chat_id: str, last_message_id: str | None = None, **fields: Any) -> ChatCursor:
    return ChatCursor(
        chat_id=chat_id,
        thread_id=fields.pop("thread_id", None),
        last_message_id=last_message_id,
        last_seen=fields.pop("last_seen", datetime.now(UTC)),
    )


def drain(running: Running) -> list[InboundMessage]:
    taken = []
    while not running.inbox.empty():
        taken.append(running.inbox.get_nowait())
    return taken


async def test_messages_posted_while_no_session_was_connected_never_arrive_live(
    harness: DiscordHarness,
) -> None:
    await harness.user_posts("anyone there?", chat_type="group")
    run = Running(harness, harness.make_adapter())
    await run.adapter.start(run.inbox.put)
    try:
        await harness.inject_message("now you are", chat_type="group")
        assert (await run.next()).text == "now you are"
        assert run.inbox.empty()
    finally:
        await run.adapter.stop()


async def test_catch_up_hands_over_what_came_after_the_last_message_taken_oldest_first(
    harness: DiscordHarness,
) -> None:
    taken = await harness.user_posts("already answered", chat_type="group")
    for text in ("missed one", "missed two", "missed three"):
        await harness.user_posts(text, chat_type="group")
    run = Running(harness, harness.make_adapter())
    await run.adapter.start(run.inbox.put)
    try:
        handed = await run.adapter.catch_up([cursor(GENERAL_CHANNEL_ID, taken)])
    finally:
        await run.adapter.stop()

    assert handed == 3
    assert [m.text for m in drain(run)] == ["missed one", "missed two", "missed three"]


async def test_caught_up_messages_follow_the_live_rules(running: Running) -> None:
    harness = running.harness
    await harness.server.drop_gateway()  # the gateway is down while these are posted
    mark = await harness.user_posts("before", chat_type="group")
    await harness.user_posts("mine", chat_type="group", from_self=True)
    await harness.user_posts("a bot", chat_type="group", from_bot=True)
    await harness.user_posts("hey you", chat_type="group", mention=True)
    await harness.wait_connected()

    await running.adapter.catch_up([cursor(GENERAL_CHANNEL_ID, mark)])

    (message,) = drain(running)
    assert (message.text, message.mentioned, message.chat_type) == ("hey you", True, "group")


async def test_catch_up_of_a_thread_and_a_dm_keeps_their_places(harness: DiscordHarness) -> None:
    in_thread = await harness.user_posts("in the thread", chat_type="group", thread_id="4242")
    in_dm = await harness.user_posts("in private", sender_id="1001")
    dm_channel = str(harness.server.messages[in_dm]["channel_id"])
    thread = str(harness.server.messages[in_thread]["channel_id"])
    run = Running(harness, harness.make_adapter())
    await run.adapter.start(run.inbox.put)
    try:
        await run.adapter.catch_up(
            [cursor(GENERAL_CHANNEL_ID, "1", thread_id=thread), cursor(dm_channel, "1")]
        )
    finally:
        await run.adapter.stop()

    places = [(m.text, m.chat_type, m.chat_id, m.thread_id) for m in drain(run)]
    assert places == [
        ("in the thread", "group", GENERAL_CHANNEL_ID, thread),
        ("in private", "dm", dm_channel, None),
    ]


async def test_catch_up_pages_through_a_long_history(harness: DiscordHarness) -> None:
    first = await harness.user_posts("message 0", chat_type="group")
    for n in range(1, 131):
        await harness.user_posts(f"message {n}", chat_type="group")
    run = Running(harness, harness.make_adapter())
    await run.adapter.start(run.inbox.put)
    try:
        handed = await run.adapter.catch_up([cursor(GENERAL_CHANNEL_ID, first)])
    finally:
        await run.adapter.stop()

    assert handed == 130
    assert [m.text for m in drain(run)] == [f"message {n}" for n in range(1, 131)]
    assert {read["limit"] for read in harness.server.history.reads} == {"100"}


async def test_catch_up_reads_no_further_back_than_its_window(harness: DiscordHarness) -> None:
    two_days_ago = datetime.now(UTC) - timedelta(days=2)
    old_id = str(discord.utils.time_snowflake(two_days_ago, high=True))
    await harness.user_posts("too old", chat_type="group", message_id=old_id)
    await harness.user_posts("recent", chat_type="group")
    run = Running(harness, harness.make_adapter(discord_catch_up_hours=24))
    await run.adapter.start(run.inbox.put)
    try:
        await run.adapter.catch_up([cursor(GENERAL_CHANNEL_ID, None)])
    finally:
        await run.adapter.stop()

    assert [m.text for m in drain(run)] == ["recent"]


async def test_catch_up_set_to_zero_hours_reads_nothing(harness: DiscordHarness) -> None:
    await harness.user_posts("missed", chat_type="group")
    run = Running(harness, harness.make_adapter(discord_catch_up_hours=0))
    await run.adapter.start(run.inbox.put)
    try:
        handed = await run.adapter.catch_up([cursor(GENERAL_CHANNEL_ID, "1")])
    finally:
        await run.adapter.stop()

    assert (handed, harness.server.history.reads, drain(run)) == (0, [], [])


async def test_a_reread_after_a_lost_session_covers_at_most_the_chats_tracked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Chats active within the window are remembered for the reread: as many as are kept,
    so a busy bot's memory does not grow with every chat it talks in."""

    async def take(message: discord.Message, bot_user_id: int) -> bool:
        raise AssertionError("no client, so nothing is read")

    catch_up = CatchUp(timedelta(hours=1), client=lambda: None, intake=asyncio.Lock(), take=take)
    for n in range(TRACKED_CHATS + 100):
        catch_up.remember(
            InboundMessage(channel="discord", chat_id=str(n), sender_id="1", text="hi")
        )
    catch_up.new_session(accepting=True)  # the start's own

    with caplog.at_level(logging.INFO, logger="adapters.discord"):
        catch_up.new_session(accepting=True)
    await catch_up.stop()

    assert f"reading {TRACKED_CHATS} chat(s) for missed messages" in caplog.text


async def test_a_lost_gateway_session_is_followed_by_reading_what_was_missed(
    running: Running,
) -> None:
    harness = running.harness
    await harness.inject_message("first", chat_type="group")
    assert (await running.next()).text == "first"
    await harness.server.drop_gateway(end_session=True)
    await harness.user_posts("while the session was lost", chat_type="group")

    # discord.py waits 5 seconds before identifying again, as Discord's rate limit asks
    missed = await asyncio.wait_for(running.inbox.get(), timeout=20.0)

    assert missed.text == "while the session was lost"
    assert len(harness.server.identify_payloads) == 2


async def test_after_a_catch_up_each_dm_answer_replies_to_the_question_it_answers(
    harness: DiscordHarness, settings: Settings, scripted: ScriptedModel
) -> None:
    """Two DMs posted while clawbot was down come in one after the other: each answer is a
    reply to its question (as in guilds), so the person can tell which is for which."""

    def answer(request: ModelRequest) -> str:
        return "Paris." if "capital" in request.last_user_text else "Four."

    scripted.function = answer
    taken = await harness.user_posts("hello", sender_id="1001")
    dm_channel = str(harness.server.messages[taken]["channel_id"])
    first = await harness.user_posts("what is 2 + 2?", sender_id="1001")
    second = await harness.user_posts("and the capital of France?", sender_id="1001")
    async with await Clawbot.open(settings) as bot:
        adapter = harness.make_adapter()
        service = Service(bot, [adapter], shutdown_timeout=5)
        await service.start()
        try:
            await adapter.catch_up([cursor(dm_channel, taken)])
            await service.idle()
        finally:
            await service.stop()

    answers = {r.text: r.raw.get("message_reference", {}).get("message_id") for r in harness.sent()}
    assert answers == {"Four.": first, "Paris.": second}
