"""The delivery gate: the only path to an adapter's send."""

from __future__ import annotations

import itertools
from typing import Literal

import pytest

from clawbot.app import Clawbot
from clawbot.channels.outbox import Outbox
from clawbot.messages import INTERNAL_CHANNEL, OutboundMessage
from clawbot.testing import MemoryChannel, ScriptedModel


def _outbox_with(*names: str) -> tuple[Outbox, dict[str, MemoryChannel]]:
    outbox = Outbox()
    channels = {name: MemoryChannel(name) for name in names}
    for channel in channels.values():
        outbox.connect(channel)
    return outbox, channels


@pytest.mark.parametrize(
    ("deliver", "kind", "thread_id"),
    list(itertools.product([True, False], ["reply", "notice", "error"], [None, "t1"])),
)
async def test_internal_channel_never_reaches_an_adapter(
    deliver: bool, kind: Literal["reply", "notice", "error"], thread_id: str | None
) -> None:
    outbox, channels = _outbox_with("telegram", "memory")

    delivery = await outbox.deliver(
        OutboundMessage(
            channel=INTERNAL_CHANNEL,
            chat_id="c",
            text="secret plan",
            deliver=deliver,
            kind=kind,
            thread_id=thread_id,
        )
    )

    assert delivery.status == "withheld"
    assert all(channel.sent == [] for channel in channels.values())


@pytest.mark.parametrize("channel_name", ["telegram", "memory"])
@pytest.mark.parametrize("kind", ["reply", "notice", "error"])
async def test_deliver_false_never_reaches_an_adapter(channel_name: str, kind: str) -> None:
    outbox, channels = _outbox_with("telegram", "memory")

    delivery = await outbox.deliver(
        OutboundMessage(channel=channel_name, chat_id="c", text="x", deliver=False, kind=kind)  # type: ignore[arg-type]
    )

    assert delivery.status == "withheld"
    assert all(channel.sent == [] for channel in channels.values())


async def test_deliverable_message_reaches_exactly_its_channel() -> None:
    outbox, channels = _outbox_with("telegram", "memory")

    delivery = await outbox.deliver(OutboundMessage(channel="memory", chat_id="c", text="hi"))

    assert delivery.status == "sent"
    assert channels["memory"].texts == ["hi"]
    assert channels["telegram"].sent == []


def test_no_adapter_can_claim_the_internal_channel() -> None:
    with pytest.raises(ValueError):
        Outbox().connect(MemoryChannel(INTERNAL_CHANNEL))


async def test_message_for_an_unconnected_channel_fails_visibly() -> None:
    outbox, _ = _outbox_with("memory")

    delivery = await outbox.deliver(OutboundMessage(channel="slack", chat_id="c", text="hi"))

    assert delivery.status == "failed"
    assert "slack" in (delivery.error or "")


async def test_a_session_with_deliver_false_produces_no_platform_message(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    session = await bot.router.session_for(channel.message("x"))
    await bot.router.update_session(session, deliver=False)

    result = await bot.router.handle(channel.message("hello"))

    assert result.kind == "turn"
    assert result.delivery is not None and result.delivery.status == "withheld"
    assert channel.sent == []
    assert len(scripted.requests) == 1


def test_only_the_outbox_calls_adapter_send() -> None:
    """A structural check: no other core module calls an adapter's send(). The outbox does
    it through the chats' pacers (and their live replies), which only the outbox makes."""
    import pathlib
    import re

    core = pathlib.Path(__file__).resolve().parent.parent / "clawbot"

    def files_with(pattern: str) -> list[str]:
        return sorted(
            path.relative_to(core).as_posix()
            for path in core.rglob("*.py")
            if re.search(pattern, path.read_text())
        )

    assert files_with(r"adapter\.send\(") == ["channels/pacer.py"]
    assert files_with(r"\b(ChatPacer|LiveReply)\(") == ["channels/outbox.py"]
