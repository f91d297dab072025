"""The terminal channel: ``clawbot chat``.

Interactive (a TTY) it offers line editing and history through prompt_toolkit. Piped, it
reads one message per line from stdin, writes each reply to stdout and everything else to
stderr, so it can be scripted. Each line's reply is complete before the next line is read.

An approval request (a message with actions) is answered right away: the next line is read
as the answer (``o``nce, ``s``ession, ``d``eny, or a typed ``/approve``...), since the turn
that asked waits for it before the chat reads on.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import sys
from typing import BinaryIO, TextIO

from clawbot.channels import Adapter, ChannelLimits, InboundHandler, SentMessage
from clawbot.messages import Action, InboundMessage, OutboundMessage
from clawbot.settings import Settings

log = logging.getLogger("clawbot.console")

CHANNEL = "console"


def to_inbound(text: str, *, chat_id: str, user: str) -> InboundMessage:
    """One line typed in the terminal as an InboundMessage (a DM with the local user)."""
    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        chat_type="dm",
        sender_id=user,
        sender_name=user,
        text=text.rstrip("\r\n"),
        message_id=None,
        mentioned=True,
    )


ANSWERS = {
    "o": " once",
    "once": " once",
    "y": " once",
    "yes": " once",
    "s": " session",
    "session": " session",
    "d": "/deny",
    "deny": "/deny",
    "n": "/deny",
    "no": "/deny",
}
ANSWER_PROMPT = "answer: o = once, s = for this session, d = deny › "


def answer_command(text: str, actions: tuple[Action, ...]) -> str | None:
    """The command a typed answer to an approval request stands for: a short answer picks
    the matching button's command, a line starting with ``/`` is taken as typed; None when
    the answer means nothing here."""
    typed = text.strip()
    if typed.startswith("/"):
        return typed
    wanted = ANSWERS.get(typed.lower())
    if wanted is None:
        return None
    for action in actions:
        if action.command.endswith(wanted) or action.command.startswith(wanted):
            return action.command
    return None


def decode_line(raw: bytes) -> str | None:
    """The line as text, or None when it is not valid UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


class ConsoleAdapter(Adapter):
    name = CHANNEL
    limits = ChannelLimits(max_message_chars=1_000_000, markup="plain")

    def __init__(
        self,
        *,
        chat_id: str = "local",
        stdin: BinaryIO | None = None,
        stdout: TextIO | None = None,
        interactive: bool | None = None,
    ) -> None:
        self.chat_id = chat_id
        self._stdin = stdin if stdin is not None else sys.stdin.buffer
        self._stdout = stdout if stdout is not None else sys.stdout
        if interactive is None:
            interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self.interactive = interactive
        self.user = _user_name()
        self.finished = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._on_message: InboundHandler | None = None
        self._answering = asyncio.Lock()
        self._answers: set[asyncio.Task[None]] = set()

    @classmethod
    def is_configured(cls, settings: Settings) -> bool:
        return True

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsoleAdapter:
        return cls(chat_id=settings.console_session)

    async def start(self, on_message: InboundHandler) -> None:
        self._on_message = on_message
        loop = self._interactive_loop if self.interactive else self._piped_loop
        self._task = asyncio.create_task(loop(on_message))
        self._task.add_done_callback(lambda _: self.finished.set())

    async def wait_closed(self) -> None:
        await self.finished.wait()

    async def stop(self) -> None:
        for answer in list(self._answers):
            answer.cancel()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.finished.set()

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        text = message.text.rstrip("\n")
        if self.interactive:
            from prompt_toolkit import print_formatted_text

            print_formatted_text(text)
        else:
            try:
                self._stdout.write(text + "\n")
                self._stdout.flush()
            except BrokenPipeError:
                self._output_closed()
                return []
        if message.actions and self._on_message is not None:
            answer = asyncio.create_task(self._answer(message.actions, self._on_message))
            self._answers.add(answer)
            answer.add_done_callback(self._answers.discard)
        return [SentMessage(channel=CHANNEL, chat_id=message.chat_id)]

    async def _answer(self, actions: tuple[Action, ...], on_message: InboundHandler) -> None:
        """Read the answer to an approval request and send it as its command. End of input
        denies it (nobody is left to say yes)."""
        deny = next((a.command for a in actions if a.command.startswith("/deny")), None)
        async with self._answering:
            while True:
                text = await self._read_answer()
                if text is None:
                    if deny is None:
                        return
                    command = deny
                    break
                answered = answer_command(text, actions)
                if answered is not None:
                    command = answered
                    break
                print(ANSWER_PROMPT.rstrip(" ›"), file=sys.stderr, flush=True)
        await self._deliver(on_message, command, 0)

    async def _read_answer(self) -> str | None:
        if self.interactive:
            from prompt_toolkit import PromptSession

            try:
                return await PromptSession[str]().prompt_async(ANSWER_PROMPT)
            except (EOFError, KeyboardInterrupt):
                return None
        print(ANSWER_PROMPT, end="", file=sys.stderr, flush=True)
        raw = await asyncio.to_thread(self._stdin.readline)
        if not raw:
            return None
        return decode_line(raw) or ""

    def _output_closed(self) -> None:
        """Whoever read our output is gone (``clawbot chat < in.txt | head -1``): further
        replies would go nowhere, so stop reading input and let the chat end quietly, as a
        shell pipeline expects."""
        if self._task is not None and not self._task.done():
            log.info("the output was closed: no more input is read")
            self._task.cancel()
        if self._stdout is sys.stdout:
            # Python flushes stdout again at exit; point it at /dev/null so that flush
            # cannot fail and print a BrokenPipeError of its own.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)

    async def _piped_loop(self, on_message: InboundHandler) -> None:
        number = 0
        while True:
            raw = await asyncio.to_thread(self._stdin.readline)
            if not raw:
                return
            number += 1
            text = decode_line(raw)
            if text is None:
                print(
                    f"clawbot: line {number} is not valid UTF-8 text and was skipped; "
                    "save your input as UTF-8",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            await self._deliver(on_message, text, number)

    async def _interactive_loop(self, on_message: InboundHandler) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        session: PromptSession[str] = PromptSession()
        print("clawbot chat — type /help for commands, Ctrl-D to quit.", file=sys.stderr)
        number = 0
        with patch_stdout():
            while True:
                try:
                    text = await session.prompt_async("you › ")
                except (EOFError, KeyboardInterrupt):
                    return
                number += 1
                await self._deliver(on_message, text, number)

    async def _deliver(self, on_message: InboundHandler, text: str, number: int) -> None:
        message = to_inbound(text, chat_id=self.chat_id, user=self.user)
        try:
            await on_message(message)
        except Exception:
            log.exception("handling line %d failed", number)


def _user_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "user"
