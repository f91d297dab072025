"""The terminal channel's normalization."""

from __future__ import annotations

import io

from adapters.console import ConsoleAdapter, decode_line, to_inbound
from clawbot.messages import InboundMessage, OutboundMessage


def test_a_typed_line_becomes_a_dm_from_the_local_user() -> None:
    message = to_inbound("hello\n", chat_id="local", user="ann")

    assert message == InboundMessage(
        channel="console",
        chat_id="local",
        chat_type="dm",
        sender_id="ann",
        sender_name="ann",
        text="hello",
        mentioned=True,
        received_at=message.received_at,
    )


def test_windows_line_endings_are_stripped() -> None:
    assert to_inbound("hi\r\n", chat_id="local", user="ann").text == "hi"


def test_invalid_utf8_is_recognised() -> None:
    assert decode_line(b"\xff\xfe oops\n") is None
    assert decode_line("héllo\n".encode()) == "héllo\n"


async def test_piped_lines_are_handled_in_order_each_reply_before_the_next_line() -> None:
    stdout = io.StringIO()
    adapter = ConsoleAdapter(stdin=io.BytesIO(b"one\ntwo\n"), stdout=stdout, interactive=False)
    seen: list[str] = []

    async def on_message(message: InboundMessage) -> None:
        seen.append(message.text)
        await adapter.send(
            OutboundMessage(channel="console", chat_id="local", text=f"re: {message.text}")
        )

    await adapter.start(on_message)
    await adapter.wait_closed()

    assert seen == ["one", "two"]
    assert stdout.getvalue() == "re: one\nre: two\n"
