"""Telegram counts message length in UTF-16 code units: emoji beyond U+FFFF count twice."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.telegram.adapter import TelegramAdapter
from clawbot.channels.chunking import split_markdown, utf16_length
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import render_parts
from clawbot.messages import InboundMessage, OutboundMessage
from tests.standins.telegram import TelegramHarness

TELEGRAM = ChannelLimits(max_message_chars=4096, markup="telegram_html", length_unit="utf16")
EMOJI_REPLY = "\n\n".join(
    f"Paragraph {n}: " + " ".join("🎉🚀" * 3 for _ in range(40)) for n in range(1, 13)
)
"""About 3,200 characters but over 6,000 UTF-16 code units."""


def test_utf16_length_counts_astral_characters_twice() -> None:
    assert utf16_length("abc") == 3
    assert utf16_length("é") == 1
    assert utf16_length("🎉") == 2


def test_the_emoji_reply_fits_in_characters_but_not_in_code_units() -> None:
    assert len(EMOJI_REPLY) < 4096 < utf16_length(EMOJI_REPLY)


def test_counting_characters_would_produce_a_part_telegram_refuses() -> None:
    by_chars = render_parts(EMOJI_REPLY, ChannelLimits(4096, "telegram_html"))

    assert max(utf16_length(part.text) for part in by_chars) > 4096


def test_render_parts_keeps_every_part_within_the_limit_in_code_units() -> None:
    parts = render_parts(EMOJI_REPLY, TELEGRAM)

    assert len(parts) == 2
    for part in parts:
        assert utf16_length(part.text) <= 4096 and utf16_length(part.plain) <= 4096
    assert parts[0].plain.startswith("Paragraph 1:") and parts[1].plain.endswith("🎉🚀")


def test_parts_split_at_a_paragraph_boundary_when_measured_in_code_units() -> None:
    chunks = split_markdown(EMOJI_REPLY, 4096, measure=utf16_length)

    assert all(utf16_length(chunk) <= 4096 for chunk in chunks)
    assert all(chunk.startswith("Paragraph ") for chunk in chunks)
    assert "\n\n".join(chunks) == EMOJI_REPLY


def test_a_word_longer_than_the_limit_is_cut_by_code_units() -> None:
    chunks = split_markdown("🎉" * 10, 7, measure=utf16_length)

    assert chunks == ["🎉🎉🎉", "🎉🎉🎉", "🎉🎉🎉", "🎉"]


def test_a_code_block_is_cut_by_code_units_and_reopened() -> None:
    code = "```\n" + "\n".join("🎉" * 20 for _ in range(10)) + "\n```"

    chunks = split_markdown(code, 100, measure=utf16_length)

    assert len(chunks) > 1
    for chunk in chunks:
        assert utf16_length(chunk) <= 100
        assert chunk.startswith("```\n") and chunk.endswith("\n```")


@pytest.fixture
async def telegram() -> AsyncIterator[tuple[TelegramHarness, TelegramAdapter]]:
    harness = TelegramHarness()
    await harness.start()
    adapter = harness.make_adapter()
    assert isinstance(adapter, TelegramAdapter)

    async def ignore(message: InboundMessage) -> None:
        pass

    await adapter.start(ignore)
    yield harness, adapter
    await adapter.stop()
    await harness.stop()


async def test_telegram_accepts_every_part_of_an_emoji_heavy_reply(
    telegram: tuple[TelegramHarness, TelegramAdapter],
) -> None:
    harness, adapter = telegram

    sent = await adapter.send(OutboundMessage(channel="telegram", chat_id="1001", text=EMOJI_REPLY))

    records = harness.sent()
    assert len(sent) == len(records) == 2
    assert all(utf16_length(record.text) <= 4096 for record in records)
    assert "".join(r.text for r in records).count("🎉") == EMOJI_REPLY.count("🎉")
