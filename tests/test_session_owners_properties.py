"""Property: whatever the order in which two processes sharing one PostgreSQL database take in
messages for a few chats, and however long the model takes, no chat ever has two turns at
once, every message is answered exactly once, and only through the owner of its chat."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from clawbot.app import Clawbot
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel

from .postgres_server import PostgresServer

CHATS = ("c1", "c2", "c3")
Arrival = tuple[int, str]  # (which process takes it in, the chat)


class Model:
    """The scripted model's answers: each names the messages it answers; calls of one chat
    in flight at once are noted."""

    def __init__(self, latencies: list[float]) -> None:
        self.latencies = latencies
        self.calls = 0
        self.in_flight: set[str] = set()
        self.overlaps: list[str] = []

    async def answer(self, request: ModelRequest) -> str:
        asked = " ".join(_new_user_texts(request))
        chat = re.findall(r"\bc\d\b", asked)[0]
        if chat in self.in_flight:
            self.overlaps.append(asked)
        self.in_flight.add(chat)
        await asyncio.sleep(self.latencies[self.calls % len(self.latencies)])
        self.calls += 1
        self.in_flight.discard(chat)
        return "answered " + " ".join(re.findall(r"\bc\d#\d+\b", asked))


def _new_user_texts(request: ModelRequest) -> list[str]:
    texts: list[str] = []
    for entry in reversed(request.messages):
        if entry["role"] == "assistant":
            break
        if entry["role"] == "user":
            texts.append(str(entry["content"]))
    return texts


def _more_than(count: int) -> Callable[[MemoryChannel], bool]:
    return lambda channel: len(channel.texts) > count


def _answered(channels: list[MemoryChannel]) -> list[str]:
    return [tag for channel in channels for text in channel.texts for tag in text.split()[1:]]


async def run_case(
    home: Path, url: str, arrivals: list[Arrival], latencies: list[float]
) -> tuple[Model, list[MemoryChannel], dict[str, int]]:
    model = Model(latencies)
    scripted = ScriptedModel(name="test", function=model.answer)
    with scripted.installed():
        bots = [
            await Clawbot.open(
                Settings(
                    home=home / name,
                    model=scripted.model_string,
                    database_url=SecretStr(url),
                    retry_backoff=0,
                    _env_file=None,  # type: ignore[call-arg]
                )
            )
            for name in ("a", "b")
        ]
        channels = [MemoryChannel(), MemoryChannel()]
        try:
            for bot, channel in zip(bots, channels, strict=True):
                bot.connect(channel)
                await bot.scheduler.start()
            first_taker: dict[str, int] = {}
            for n, (process, chat) in enumerate(arrivals):
                first_taker.setdefault(chat, process)
                text = f"{chat}#{n} please"
                await bots[process].router.receive(channels[process].message(text, chat_id=chat))

            async def all_answered() -> None:
                while len(_answered(channels)) < len(arrivals):
                    waits = [
                        asyncio.ensure_future(channel.shows(_more_than(len(channel.texts))))
                        for channel in channels
                    ]
                    _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    for wait in pending:
                        wait.cancel()

            await asyncio.wait_for(all_answered(), timeout=60)
            for bot in bots:
                await bot.scheduler.wait_idle()
        finally:
            for bot in reversed(bots):
                await bot.close()
    return model, channels, first_taker


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    arrivals=st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from(CHATS)), min_size=1, max_size=14
    ),
    latencies=st.lists(st.sampled_from([0.0, 0.001, 0.004]), min_size=1, max_size=4),
)
def test_two_processes_answer_every_message_once_and_never_run_a_chat_twice_at_once(
    postgres_server: PostgresServer, arrivals: list[Arrival], latencies: list[float]
) -> None:
    url = postgres_server.new_database(migrated=True)
    with TemporaryDirectory() as folder:
        model, channels, first_taker = asyncio.run(run_case(Path(folder), url, arrivals, latencies))

    assert model.overlaps == []
    assert sorted(_answered(channels)) == sorted(
        f"{chat}#{n}" for n, (_, chat) in enumerate(arrivals)
    )
    for chat, owner in first_taker.items():
        other = channels[1 - owner]
        assert not any(f"{chat}#" in text for text in other.texts)
