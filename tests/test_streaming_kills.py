"""A streamed reply survives SIGKILL, seen from outside: ``clawbot run`` as a subprocess
against the Telegram stand-in (group chats, where a reply streams into a message edited as it
grows) and the OpenAI-compatible stand-in streaming its answer slowly.

Each message is followed by a kill at a random point: before the model answers, while the
preview grows, while it is made final, or after (the turns the start before it recovered
are killed wherever they are too). At the next start the turn runs again, and
each chat must end with exactly one final answer (or one failure notice quoting the message),
never a partial preview sent again as a reply; the transcript holds the final reply once. The
preview the killed process left stays as it was: a person sees what they saw, then the answer.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.spawned import KillSeed
from tests.standins.openai_api import OpenAIStandin
from tests.standins.telegram import DEFAULT_GROUP_ID, TelegramHarness
from tests.test_edge_telegram import REPLY_TIMEOUT, BotProcess, bot_environment, start_polling_bot

SEED = KillSeed.drawn("STREAM_KILL_SEED")
"""Seeds the kill points: a failure names its seed, ``STREAM_KILL_SEED=<seed>`` replays it."""
pytestmark = pytest.mark.usefixtures("spawned_processes")

KILLS = 4
END = "END-OF-REPLY"
"""The reply's last word: a preview holds back the word being written, so only the final
text shows it."""
TAIL = " " + " ".join(f"line{n} of a reply that streams into the chat" for n in range(30)) + END
STREAM_SECONDS = 190 * 0.008
"""How long the model takes over a reply: some 190 chunks of 8 characters, 8 ms apart."""
FAILURE = "Sorry, "
OWNER = "1001"
FALLBACK_KILL = 20.0
"""Seconds after which a message whose preview never showed is killed anyway."""


@pytest.fixture
async def harness() -> Any:
    h = TelegramHarness()
    await h.start()
    yield h
    await h.stop()


@pytest.fixture
def model() -> Any:
    server = OpenAIStandin()
    server.chunk_seconds = STREAM_SECONDS / 190
    server.echo_tail = TAIL
    with server.running():
        yield server


def group(n: int) -> str:
    """A group chat of its own for the n-th message: each is a conversation of its own."""
    return str(DEFAULT_GROUP_ID - n)


def is_final(text: str, message: str) -> bool:
    return text.endswith(END) or (text.startswith(FAILURE) and message in text)


def stored_replies(home: Path, chat: str) -> list[str]:
    """The assistant texts of the chat's transcript, read from the database file."""
    with sqlite3.connect(home / "clawbot.db") as db:
        rows = db.execute(
            "SELECT m.content_json FROM messages m JOIN sessions s ON s.key = m.session_key "
            "WHERE s.chat_id = ? AND m.role = 'assistant' ORDER BY m.id",
            (chat,),
        ).fetchall()
    texts = []
    for (content,) in rows:
        blocks = json.loads(content)
        texts.append("".join(b.get("text", "") for b in blocks if b.get("type") == "text"))
    return [text for text in texts if text]


async def test_a_reply_killed_mid_stream_ends_as_one_final_answer_and_no_preview_is_resent(
    tmp_path: Path, harness: TelegramHarness, model: OpenAIStandin
) -> None:
    rng = SEED.random("streaming")
    chats = [group(n) for n in range(KILLS)]
    env = bot_environment(
        tmp_path,
        harness,
        model,
        CLAWBOT_STREAMING="on",
        CLAWBOT_STREAMING_CHANNELS="telegram:on",
        CLAWBOT_ALLOWED_SENDERS=f"telegram:{OWNER}",
        CLAWBOT_ALLOWED_GROUPS=",".join(f"telegram:{chat}" for chat in chats),
    )
    server = harness.server
    texts = [f"question {n} {rng.randrange(10**6):06d}" for n in range(KILLS)]
    final_before_kill: set[str] = set()
    logs: list[str] = []
    with SEED.named():
        for chat, text in zip(chats, texts, strict=True):
            bot = await start_polling_bot(env, tmp_path, harness)

            def kill(bot: BotProcess = bot, chat: str = chat, text: str = text) -> None:
                if any(is_final(shown, text) for shown in server.chat_shows(int(chat))):
                    final_before_kill.add(chat)
                bot.kill()

            def on_result(
                method: str, params: dict[str, Any], _result: Any, chat: str = chat
            ) -> None:
                if method == "sendMessage" and str(params.get("chat_id")) == chat:
                    server.on_result = None  # the first preview shows: kill while it grows,
                    later = rng.uniform(0, STREAM_SECONDS * 1.5)  # it ends, or after
                    asyncio.get_running_loop().call_later(later, kill)

            early = rng.random() < 0.2
            loop = asyncio.get_running_loop()
            if early:  # before the model has written anything
                timer = loop.call_later(rng.uniform(0.02, 0.5), kill)
            else:
                server.on_result = on_result
                timer = loop.call_later(FALLBACK_KILL, kill)
            await harness.inject_message(text, chat_type="group", chat_id=chat, mention=True)
            assert await bot.wait(REPLY_TIMEOUT) == -signal.SIGKILL, bot.log
            timer.cancel()
            server.on_result = None
            logs.append(bot.log)

        bot = await start_polling_bot(env, tmp_path, harness)
        try:
            await server.wait_for(
                lambda: all(
                    any(is_final(shown, text) for shown in server.chat_shows(int(chat)))
                    for chat, text in zip(chats, texts, strict=True)
                ),
                REPLY_TIMEOUT,
            )
        except TimeoutError:
            raise AssertionError(f"a chat never got its answer:\n{bot.log}") from None
        exit_code = await bot.terminate()  # its turns end first: nothing is still on its way
        logs.append(bot.log)

        for chat, text in zip(chats, texts, strict=True):
            shows = server.chat_shows(int(chat))
            finals = [shown for shown in shows if is_final(shown, text)]
            previews = [shown for shown in shows if not is_final(shown, text)]
            # once; a second copy only of a final a kill caught before it was recorded as
            # sent (Telegram has no idempotent send: the next start sends it again)
            assert len(finals) == 1 or (
                chat in final_before_kill and len(finals) == 2 and finals[0] == finals[1]
            ), (text, shows)
            if finals[0].endswith(END):
                assert text in finals[0], (text, shows)
                # what a killed process showed stays as it was (the turn may have been
                # recovered and killed again, each leaving its preview), never sent again
                # as a reply: each is a part of the answer the process had shown, cut short
                assert len(previews) <= KILLS, (text, shows)
                assert all(finals[0].startswith(shown) for shown in previews), (text, shows)
                assert stored_replies(tmp_path / "home", chat).count(finals[0]) == 1
        assert exit_code == 0, logs[-1]
        assert not any("Traceback" in log for log in logs), "\n".join(logs)
