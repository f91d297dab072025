"""A bot serving one platform's stand-in with streaming on, and what that platform's chat shows:
the setup of tests/test_streaming_platforms.py and bench/bench_live_replies.py.

Telegram and Slack keep their documented rates; with ``virtual`` time (the default) the chat's
pacer and the stand-in read one :class:`VirtualClock`, which moves only when something waits,
so a minute of pacing takes none. discord.py waits in real time on the headers the stand-in
sends, so Discord's buckets and the pacer's intervals are scaled down to
:data:`DISCORD_SCALE` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from clawbot.app import Clawbot
from clawbot.channels.harness import SentRecord
from clawbot.channels.interface import Adapter
from clawbot.channels.rendering import render_parts
from clawbot.cli.service import Service
from clawbot.settings import Settings
from clawbot.testing import ScriptedModel, StreamPace, VirtualClock
from tests.standins.discord import GENERAL_CHANNEL_ID, DiscordHarness, DiscordRates
from tests.standins.rate_rules import ChatActivity, FixedWindow, RateBook, TokenBucket
from tests.standins.slack import SlackHarness, SlackRates
from tests.standins.telegram import DEFAULT_GROUP_ID, TelegramHarness, TelegramRates

Platform = Literal["telegram", "discord", "slack"]
Strictness = Literal["documented", "strict", "stricter"]
"""The stand-in's rates: as documented (bursts allowed), ``strict`` (no bursts: each call
keeps the platform's pace to the letter) or ``stricter`` (a quarter of the pace clawbot
keeps, Discord half, so the platform asks to wait again and again)."""

OWNER = "1001"
CHUNK = 250
"""Characters a streamed chunk carries: 40 chunks for a 10,000-character reply."""
SECONDS_A_CHUNK = 0.25
"""How long the model takes over a chunk, in virtual time: 10 s for 10,000 characters."""
DISCORD_SCALE = 0.05
"""Discord's buckets and the pacer's intervals, scaled: 5 per 0.25 s, one call per 0.05 s."""
VOCABULARY = ("the", "reply", "streams", "into", "chat", "while", "model", "writes", "it", "ends")
GROUPS: dict[Platform, str] = {
    "telegram": str(DEFAULT_GROUP_ID),
    "discord": GENERAL_CHANNEL_ID,
    "slack": "C0GENERAL",
}
DMS: dict[Platform, str] = {"telegram": OWNER, "slack": f"D{OWNER}"}


def long_reply(chars: int = 10_000, seed: int = 7) -> str:
    """Plain prose in paragraphs (no markup, so each platform shows it as written)."""
    rng = random.Random(seed)
    paragraphs: list[str] = []
    while sum(len(p) + 2 for p in paragraphs) < chars:
        words = (rng.choice(VOCABULARY) for _ in range(rng.randint(40, 120)))
        paragraphs.append(" ".join(words) + ".")
    text = "\n\n".join(paragraphs)[:chars].rstrip()
    return text if text.endswith(".") else text + "."


@dataclass
class StandIn:
    """One platform's stand-in as these tests read it."""

    harness: TelegramHarness | DiscordHarness | SlackHarness
    server: Any
    shows: Callable[[str], list[str]]
    """What a chat shows in the end: its messages' texts, oldest first."""
    delete: Callable[[str, str], None]
    """Delete a message of the bot's, as a person with the right to would."""
    observe: Callable[[Callable[[str, dict[str, Any]], None]], None]
    """Have a callback told each API call (its name and arguments) as it arrives."""


def _telegram(strictness: Strictness) -> StandIn:
    harness = TelegramHarness()
    server = harness.server
    if strictness != "documented":
        pace = 0.25 if strictness == "stricter" else 1.0
        server.rates = TelegramRates(per_chat=TokenBucket(per_second=pace, burst=1))

    def delete(chat: str, message_id: str) -> None:
        del server.messages[(int(chat), int(message_id))]

    def observe(callback: Callable[[str, dict[str, Any]], None]) -> None:
        server.on_call = callback

    return StandIn(harness, server, lambda chat: server.chat_shows(int(chat)), delete, observe)


def _discord(strictness: Strictness) -> StandIn:
    harness = DiscordHarness()
    server = harness.server
    seconds = (10 if strictness == "stricter" else 5) * DISCORD_SCALE
    bucket = FixedWindow(limit=5, seconds=seconds)
    server.rates = DiscordRates(post=bucket, edit=bucket)

    def observe(callback: Callable[[str, dict[str, Any]], None]) -> None:
        raise NotImplementedError("the benchmark measures Telegram and Slack")

    return StandIn(
        harness, server, server.chat_shows, lambda _chat, mid: server.deleted.add(mid), observe
    )


def _slack(strictness: Strictness) -> StandIn:
    harness = SlackHarness()
    server = harness.standin
    if strictness != "documented":
        pace = 0.25 if strictness == "stricter" else 1.0
        server.rates = SlackRates(
            post=TokenBucket(per_second=pace, burst=1),
            update=TokenBucket(per_second=pace * 50 / 60, burst=1),
        )

    def observe(callback: Callable[[str, dict[str, Any]], None]) -> None:
        server.on_call = callback

    return StandIn(
        harness,
        server,
        server.chat_shows,
        lambda chat, mid: server.deleted.add((chat, mid)),
        observe,
    )


STAND_INS: dict[Platform, Callable[[Strictness], StandIn]] = {
    "telegram": _telegram,
    "discord": _discord,
    "slack": _slack,
}


@dataclass
class Live:
    """The bot serving a stand-in, the conversation's chat and what it shows."""

    platform: Platform
    chat: str
    standin: StandIn
    adapter: Adapter
    bot: Clawbot
    service: Service
    say: Callable[..., Awaitable[str]]
    """``say(text, **fields)``: the owner writes to the bot in the chat (mentioning it in a
    group); ``fields`` as the harness's ``inject_message`` takes them (another sender, chat)."""
    clock: VirtualClock | None

    @property
    def book(self) -> RateBook:
        book: RateBook = self.standin.server.book
        return book

    def activity(self) -> ChatActivity:
        return self.book.activity(self.chat)

    def shows(self) -> list[str]:
        return self.standin.shows(self.chat)

    def sent(self) -> list[SentRecord]:
        return [record for record in self.standin.harness.sent() if record.chat_id == self.chat]

    def parts(self, text: str) -> list[str]:
        """What the chat shows for ``text`` sent as any reply: its parts' visible text."""
        return [part.plain for part in render_parts(text, self.adapter.limits)]

    async def stream(
        self,
        pace: StreamPace,
        reply: str,
        *,
        once_shown: Callable[[], None] | None = None,
        seconds_a_chunk: float = SECONDS_A_CHUNK,
    ) -> None:
        """Let the model write ``reply`` a chunk at a time, chunk ``k`` at ``k`` times
        ``seconds_a_chunk`` of virtual time (or when the pacer's waits brought the clock
        there), then wait for the turn to end. ``once_shown`` runs as soon as the chat shows
        a first message of it."""
        chunks = -(-len(reply) // CHUNK)
        start = self.clock.now if self.clock is not None else 0.0
        for written in range(1, chunks):
            await asyncio.wait_for(pace.held(), 30)
            if self.clock is None and written == 2 and self.platform == "discord":
                # in real time, the model writes on once its first words show (the first
                # preview waits FIRST_PREVIEW_HOLD): a long reply is previewed, as in life
                await self.standin.server.until(lambda: bool(self.sent()), 30)
            if once_shown is not None and self.sent():
                once_shown()
                once_shown = None
            if self.clock is not None:  # the next chunk comes at its time, or now if later
                self.clock.now = max(self.clock.now, start + written * seconds_a_chunk)
            pace.allow(1)
        pace.release()
        await asyncio.wait_for(self.service.idle(), 60)


@contextlib.asynccontextmanager
async def serving(
    platform: Platform,
    home: Path,
    model: ScriptedModel,
    *,
    chat_type: Literal["dm", "group"] = "group",
    strictness: Strictness = "documented",
    virtual: bool = True,
    **settings: Any,
) -> AsyncIterator[Live]:
    """``platform``'s stand-in and a bot serving it with streaming on, for a conversation
    of the owner's in a ``chat_type`` chat; ``virtual=False`` keeps real time throughout;
    ``settings`` override the bot's."""
    standin = STAND_INS[platform](strictness)
    clock = VirtualClock() if virtual and platform != "discord" else None
    if clock is not None:
        standin.server.book = RateBook(clock=clock.monotonic, resolution=1.0)
    chat = GROUPS[platform] if chat_type == "group" else DMS[platform]
    await standin.harness.start()
    values: dict[str, Any] = {
        "allowed_senders": [f"{platform}:{OWNER}"],
        "allowed_groups": [f"{platform}:{GROUPS[platform]}"],
        **settings,
    }
    bot_settings = Settings(
        home=home,
        model=model.model_string,
        retry_backoff=0,
        shell_unsandboxed="allow-host-access",  # no tool runs; where bwrap cannot run
        streaming=True,
        streaming_channels={platform: True},
        _env_file=None,  # type: ignore[call-arg]
    ).model_copy(update=values)

    async def say(text: str, **fields: Any) -> str:
        fields = {
            "chat_type": chat_type,
            "mention": chat_type == "group",
            "sender_id": OWNER,
            **fields,
        }
        return await standin.harness.inject_message(text, **fields)

    try:
        async with await Clawbot.open(bot_settings) as bot:
            adapter = standin.harness.make_adapter()
            if platform == "discord":
                adapter.limits = replace(
                    adapter.limits, message_interval=DISCORD_SCALE, edit_interval=DISCORD_SCALE
                )
            if clock is not None:
                bot.outbox.clock = clock
            service = Service(bot, [adapter], shutdown_timeout=10)
            await service.start()
            try:
                yield Live(platform, chat, standin, adapter, bot, service, say, clock)
            finally:
                await service.stop()
    finally:
        await standin.harness.stop()
