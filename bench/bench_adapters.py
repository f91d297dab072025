"""The adapters' pure work, measured: inbound conversion (platform update -> InboundMessage)
per adapter, and the shared renderer + chunker per markup.

    python bench/bench_adapters.py               # 10,000 messages
    python bench/bench_adapters.py --messages 2000 --seed 3

Messages are a seeded random mix: short chat lines, paragraphs, and long replies with code
blocks, lists and emphasis (over every platform's limit). Inbound payloads are built as each
library hands them to the adapter (telegram ``Update``, ``discord.Message``, Slack event dict)
before the clock starts, so only the adapter's conversion is timed.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from discord.types.gateway import ThreadCreateEvent
    from discord.types.guild import Guild as GuildPayload
    from discord.types.message import Message as MessagePayload
    from discord.types.user import User as UserPayload

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.discord.inbound import inbound_from_message
from adapters.slack.inbound import BotIdentity as SlackBot
from adapters.slack.inbound import event_to_inbound
from adapters.telegram.inbound import BotIdentity as TelegramBot
from adapters.telegram.inbound import update_to_inbound
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import render_parts
from tests.standins.discord import BOT_USER_ID, DiscordHarness
from tests.standins.slack import BOT_ID
from tests.standins.slack import BOT_USER_ID as SLACK_BOT_USER
from tests.standins.telegram import DEFAULT_BOT_ID, DEFAULT_BOT_USERNAME, TelegramHarness

WORDS = [
    "the",
    "deploy",
    "is",
    "on",
    "friday",
    "please",
    "check",
    "logs",
    "again",
    "tomorrow",
    "cache",
    "latency",
    "ok",
    "thanks",
    "database",
    "migration",
    "failed",
    "because",
    "index",
    "was",
    "missing",
    "could",
    "you",
    "look",
    "into",
    "it",
    "why",
    "what",
    "when",
    "where",
    "and",
    "or",
    "but",
    "not",
    "quite",
    "sure",
    "maybe",
    "later",
    "review",
    "merged",
    "branch",
    "tests",
]
EMOJI = ["🎉", "🚀", "👍", "😀", "🔥"]


def sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    if rng.random() < 0.1:
        text += " " + rng.choice(EMOJI)
    return text.capitalize() + rng.choice(".?!")


def paragraph(rng: random.Random, length: int) -> str:
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < length:
        text = sentence(rng, rng.randint(5, 16))
        if rng.random() < 0.15:
            word = rng.choice(WORDS)
            text = text.replace(word, f"**{word}**", 1)
        if rng.random() < 0.1:
            text += " See <https://example.com/docs> & `config.toml`."
        parts.append(text)
    return " ".join(parts)


def long_reply(rng: random.Random) -> str:
    blocks: list[str] = []
    for _ in range(rng.randint(4, 12)):
        kind = rng.random()
        if kind < 0.45:
            blocks.append(paragraph(rng, rng.randint(200, 700)))
        elif kind < 0.7:
            lines = [f"value_{n} = compute({n}, cache=True)  # <step {n}>" for n in range(40)]
            blocks.append("```python\n" + "\n".join(lines[: rng.randint(5, 40)]) + "\n```")
        elif kind < 0.85:
            blocks.append("\n".join(f"- {sentence(rng, rng.randint(3, 9))}" for _ in range(6)))
        else:
            blocks.append(f"## {sentence(rng, 4)}")
    return "\n\n".join(blocks)


def corpus(count: int, seed: int) -> list[str]:
    """50 % short chat lines, 35 % paragraphs, 15 % long replies with code blocks."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.5:
            texts.append(sentence(rng, rng.randint(2, 12)))
        elif roll < 0.85:
            texts.append(paragraph(rng, rng.randint(150, 900)))
        else:
            texts.append(long_reply(rng))
    return texts


def shape(rng: random.Random) -> dict[str, Any]:
    """Where an inbound message happens: DM, group, mention, thread, reply to the bot."""
    roll = rng.random()
    if roll < 0.5:
        return {"chat_type": "dm", "sender_id": str(1000 + rng.randint(1, 50))}
    fields: dict[str, Any] = {"chat_type": "group", "mention": rng.random() < 0.4}
    if roll > 0.85:
        fields["reply_to_bot"] = True
    return fields


def telegram_updates(texts: Sequence[str], seed: int) -> list[Any]:
    from telegram import Update

    rng = random.Random(seed)
    harness = TelegramHarness()
    updates = []
    for n, text in enumerate(texts):
        fields = shape(rng)
        if fields.get("chat_type") == "group" and rng.random() < 0.2:
            fields["thread_id"] = "77"
        message = harness.build_message(text, **fields)
        updates.append(Update.de_json({"update_id": n + 1, "message": message}, None))
    return updates


def discord_messages(texts: Sequence[str], seed: int) -> list[Any]:
    """``discord.Message`` objects built by the library's own state, as on MESSAGE_CREATE
    (the same replay as ``DiscordHarness.library_message``, with one state for all)."""
    import discord
    from discord.guild import Guild
    from discord.user import ClientUser

    from adapters.discord.gateway import intents

    rng = random.Random(seed)
    harness = DiscordHarness()
    state = discord.Client(intents=intents())._connection
    state.user = ClientUser(state=state, data=cast("UserPayload", harness.server.bot_user))
    state._add_guild(Guild(data=cast("GuildPayload", harness.server.guild_payload()), state=state))
    messages = []
    for text in texts:
        fields = shape(rng)
        fields.pop("reply_to_bot", None)
        if fields.get("chat_type") == "group" and rng.random() < 0.2:
            fields["thread_id"] = "1100000000000000777"
        payload, announcements = harness.compose_message(text[:2000], **fields)
        for event, data in announcements:
            if event == "THREAD_CREATE":
                state.parse_thread_create(cast("ThreadCreateEvent", data))
            elif event == "CHANNEL_CREATE":
                state.parse_channel_create(data)
        message = cast("MessagePayload", payload)
        channel, _guild = state._get_guild_channel(message)
        # The union the library's lookup returns is wider than Message declares; its own
        # gateway handler passes it the same way.
        messages.append(discord.Message(state=state, channel=channel, data=message))  # type: ignore[arg-type]
    return messages


def slack_events(texts: Sequence[str], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    events = []
    for n, text in enumerate(texts):
        fields = shape(rng)
        dm = fields["chat_type"] == "dm"
        event: dict[str, Any] = {
            "type": "message",
            "channel": f"D{fields['sender_id']}" if dm else "C0GENERAL",
            "channel_type": "im" if dm else "channel",
            "user": fields.get("sender_id", "U0ANN"),
            "user_profile": {"display_name": "Ann", "real_name": "Ann Example"},
            "text": f"<@{SLACK_BOT_USER}> {text}" if fields.get("mention") else text,
            "ts": f"1700000000.{n:06}",
            "team": "T0001",
        }
        if fields.get("reply_to_bot") or rng.random() < 0.1:
            event.update(thread_ts="1699999999.000100", parent_user_id=SLACK_BOT_USER)
        events.append(event)
    return events


def timed(convert: Callable[[Any], Any], items: Sequence[Any]) -> tuple[float, int]:
    started = time.perf_counter()
    produced = 0
    for item in items:
        if convert(item) is not None:
            produced += 1
    return time.perf_counter() - started, produced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    texts = corpus(args.messages, args.seed)
    long_ones = sum(len(t) > 2000 for t in texts)
    print(
        f"{len(texts):,} messages (seed {args.seed}): {sum(map(len, texts)) / len(texts):,.0f} "
        f"characters on average, {long_ones:,} over 2,000"
    )

    telegram_bot = TelegramBot(id=DEFAULT_BOT_ID, username=DEFAULT_BOT_USERNAME)
    slack_bot = SlackBot(user_id=SLACK_BOT_USER, bot_id=BOT_ID)
    inbound = [
        ("telegram", telegram_updates, lambda u: update_to_inbound(u, telegram_bot)),
        (
            "discord",
            discord_messages,
            lambda m: inbound_from_message(m, bot_user_id=int(BOT_USER_ID)),
        ),
        ("slack", slack_events, lambda e: event_to_inbound(e, bot=slack_bot)),
    ]
    rows: list[tuple[str, float, str]] = []
    for name, build, convert in inbound:
        items = build(texts, args.seed)
        seconds, produced = timed(convert, items)
        rows.append((f"inbound {name}", len(items) / seconds, f"{produced:,} messages"))

    limits = [
        ("telegram_html", ChannelLimits(4096, "telegram_html", length_unit="utf16")),
        ("discord_markdown", ChannelLimits(2000, "discord_markdown")),
        ("slack_mrkdwn", ChannelLimits(4000, "slack_mrkdwn")),
        ("plain", ChannelLimits(4000, "plain")),
    ]
    for name, limit in limits:
        parts = 0
        started = time.perf_counter()
        for text in texts:
            parts += len(render_parts(text, limit))
        seconds = time.perf_counter() - started
        rows.append(
            (
                f"render+chunk {name} ({limit.max_message_chars})",
                len(texts) / seconds,
                f"{parts:,} parts",
            )
        )

    print(f"{'stage':<36} {'msgs/s':>10} {'µs/msg':>8}  output")
    for stage, rate, note in rows:
        print(f"{stage:<36} {rate:>10,.0f} {1e6 / rate:>8.1f}  {note}")


if __name__ == "__main__":
    main()
