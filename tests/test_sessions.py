"""Session keys and the transcript across restarts."""

from __future__ import annotations

from clawbot.app import Clawbot
from clawbot.messages import InboundMessage
from clawbot.routing.sessions import session_key, session_key_for
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel

from .conftest import Chat


def test_a_session_key_is_channel_and_chat() -> None:
    assert session_key("telegram", "42") == "telegram:42"


def test_a_thread_is_its_own_session() -> None:
    assert session_key("slack", "C1", "1700000000.1") == "slack:C1:1700000000.1"


def test_two_people_in_dms_never_share_a_session() -> None:
    ann = InboundMessage(channel="discord", chat_id="dm-ann", sender_id="ann", text="hi")
    bob = InboundMessage(channel="discord", chat_id="dm-bob", sender_id="bob", text="hi")

    assert session_key_for(ann) != session_key_for(bob)


def test_everyone_in_a_group_shares_its_session() -> None:
    ann = InboundMessage(
        channel="telegram", chat_id="-100", chat_type="group", sender_id="ann", text="a"
    )
    bob = InboundMessage(
        channel="telegram", chat_id="-100", chat_type="group", sender_id="bob", text="b"
    )

    assert session_key_for(ann) == session_key_for(bob) == "telegram:-100"


async def test_the_transcript_survives_closing_and_reopening_the_database(
    settings: Settings, scripted: ScriptedModel
) -> None:
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.handle(channel.message("remember: the code is 1234"))

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.handle(channel.message("what is the code?"))

    history = [(m["role"], m["content"]) for m in scripted.requests[-1].messages[1:]]
    assert history == [
        ("user", "remember: the code is 1234"),
        ("assistant", "ok"),
        ("user", "what is the code?"),
    ]


async def test_a_redelivered_message_is_processed_once(
    chat: Chat, scripted: ScriptedModel, channel: MemoryChannel
) -> None:
    first = await chat.say("hello", message_id="m1")
    second = await chat.say("hello", message_id="m1")

    assert (first.kind, second.kind) == ("turn", "duplicate")
    assert len(scripted.requests) == 1
    assert channel.texts == ["ok"]


async def test_group_messages_tell_the_model_who_is_speaking(
    chat: Chat, scripted: ScriptedModel
) -> None:
    await chat.say("hi all", chat_type="group", sender_name="Ann")

    assert scripted.requests[0].last_user_text == "[Ann] hi all"
