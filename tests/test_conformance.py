"""The shipped conformance suite (clawbot/testing/conformance.py) for every platform clawbot ships a
stand-in of: the real adapter against the stand-in in tests/standins/, through the whole
pipeline. A channel in its own distribution runs the same suite the same way
(docs/channels.md; tests/test_channel_kit.py proves it for a channel outside this list)."""

from __future__ import annotations

from clawbot.testing.conformance import ChannelConformance, Platform
from tests.standins.discord import GENERAL_CHANNEL_ID, DiscordHarness
from tests.standins.slack import SlackHarness
from tests.standins.telegram import DEFAULT_GROUP_ID, TelegramHarness


class TestTelegram(ChannelConformance):
    platform = Platform(
        name="telegram",
        harness=TelegramHarness,
        group_id=str(DEFAULT_GROUP_ID),
        thread_id="77",
        message_id="4242",
        has_typing=True,
        code_open="<pre",
        code_close="</pre>",
        markup=lambda record: str(record.raw["text"]),
    )


class TestDiscord(ChannelConformance):
    platform = Platform(
        name="discord",
        harness=DiscordHarness,
        group_id=GENERAL_CHANNEL_ID,
        thread_id="1100000000000000777",
        message_id="1100000000000004242",
        has_typing=True,
        code_open="```",
        code_close="```",
        markup=lambda record: record.text,
    )


class TestSlack(ChannelConformance):
    platform = Platform(
        name="slack",
        harness=SlackHarness,
        group_id="C0GENERAL",
        thread_id="1700000000.000777",
        message_id="1700000000.004242",
        has_typing=False,  # Slack gives bots no typing indicator
        code_open="```",
        code_close="```",
        markup=lambda record: record.text,
    )
