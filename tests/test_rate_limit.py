"""One flooding sender cannot starve the others: a token bucket per sender, told once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.messages import Attachment
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel

T0 = datetime(2030, 1, 1, tzinfo=UTC)
NOTICE = "You're sending messages faster than I can take them"


@pytest.fixture
async def limited(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Clawbot]:
    """Three messages at once, then one every 10 s (six a minute)."""
    scripted.function = lambda request: f"answer to {request.last_user_text}"
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        rate_limit_per_minute=6,
        rate_limit_burst=3,
        _env_file=None,  # type: ignore[call-arg]
    )
    async with await Clawbot.open(settings) as bot:
        yield bot


async def say(
    bot: Clawbot,
    channel: MemoryChannel,
    text: str,
    *,
    at: datetime,
    sender: str = "flooder",
    **fields: Any,
) -> None:
    message = channel.message(text, chat_id=sender, sender_id=sender, received_at=at, **fields)
    await bot.router.handle(message)


async def test_a_flood_is_answered_up_to_the_burst_and_told_once(limited: Clawbot) -> None:
    channel = MemoryChannel()
    limited.connect(channel)

    for n in range(8):
        await say(limited, channel, f"m{n}", at=T0)

    answers = [text for text in channel.texts if text.startswith("answer")]
    notices = [text for text in channel.texts if text.startswith(NOTICE)]
    assert answers == ["answer to m0", "answer to m1", "answer to m2"]
    assert len(notices) == 1
    assert "about 10 s" in notices[0]


async def test_refused_messages_are_not_stored(limited: Clawbot) -> None:
    channel = MemoryChannel()
    limited.connect(channel)

    for n in range(5):
        await say(limited, channel, f"m{n}", at=T0)

    stored = await limited.store.transcripts.load(f"{channel.name}:flooder", 0)
    assert [e.text for e in stored if e.role == "user"] == ["m0", "m1", "m2"]


def files(channel: MemoryChannel, count: int) -> tuple[Attachment, ...]:
    return tuple(channel.attach(f"f{n}.txt", b"x", "text/plain") for n in range(count))


async def test_each_file_a_message_carries_counts_against_the_limit(limited: Clawbot) -> None:
    channel = MemoryChannel()
    limited.connect(channel)

    await say(limited, channel, "two files", at=T0, attachments=files(channel, 2))
    await say(limited, channel, "two more", at=T0, attachments=files(channel, 2))
    await say(limited, channel, "just text", at=T0)

    stored = await limited.store.transcripts.load(f"{channel.name}:flooder", 0)
    asked = [e.text for e in stored if e.role == "user" and e.provenance.source == "user"]
    assert asked == ["two files", "just text"]
    assert len([text for text in channel.texts if text.startswith(NOTICE)]) == 1


async def test_a_message_with_more_files_than_allowed_is_refused_naming_the_limit(
    limited: Clawbot,
) -> None:
    channel = MemoryChannel()
    limited.connect(channel)

    await say(limited, channel, "all of them", at=T0, sender="calm", attachments=files(channel, 11))

    assert channel.texts == [
        "Your message carries 11 files; I take at most 10 in one message "
        "(CLAWBOT_ATTACHMENTS_PER_MESSAGE). Send them in smaller groups."
    ]


async def test_another_sender_is_served_during_a_flood(limited: Clawbot) -> None:
    channel = MemoryChannel()
    limited.connect(channel)
    for n in range(6):
        await say(limited, channel, f"m{n}", at=T0)

    await say(limited, channel, "hello", at=T0, sender="calm")

    assert channel.texts[-1] == "answer to hello"


async def test_a_flooder_is_taken_again_once_the_bucket_refills(limited: Clawbot) -> None:
    channel = MemoryChannel()
    limited.connect(channel)
    for n in range(5):
        await say(limited, channel, f"m{n}", at=T0)

    await say(limited, channel, "later", at=T0 + timedelta(seconds=10))
    for n in range(3):
        await say(limited, channel, f"again {n}", at=T0 + timedelta(seconds=10))

    shown = ["notice" if text.startswith(NOTICE) else text for text in channel.texts]
    assert shown == [
        "answer to m0",
        "answer to m1",
        "answer to m2",
        "notice",
        "answer to later",
        "notice",  # a new flood after a message was taken: told again, once
    ]


async def test_messages_written_at_a_persons_pace_but_delivered_at_once_are_all_taken(
    limited: Clawbot,
) -> None:
    """A platform's backlog after a restart, or Discord's catch-up: one burst on arrival,
    but each message carries the time it was sent."""
    channel = MemoryChannel()
    limited.connect(channel)

    for n in range(10):
        await say(limited, channel, f"m{n}", at=T0 + timedelta(seconds=10 * n))

    assert channel.texts == [f"answer to m{n}" for n in range(10)]


async def test_the_terminal_is_never_limited(limited: Clawbot) -> None:
    console = MemoryChannel(name="console")
    limited.connect(console)

    for n in range(8):
        await say(limited, console, f"m{n}", at=T0)

    assert console.texts == [f"answer to m{n}" for n in range(8)]


async def test_a_limit_of_zero_turns_it_off(tmp_path: Path, scripted: ScriptedModel) -> None:
    scripted.function = lambda request: "ok"
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        rate_limit_per_minute=0,
        rate_limit_burst=1,
        _env_file=None,  # type: ignore[call-arg]
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        for n in range(5):
            await say(bot, channel, f"m{n}", at=T0)

    assert channel.texts == ["ok"] * 5
