"""The terminal channel: ``clawbot chat``.

One reader owns the input and hands each line to the router the moment it is read, so a
command is answered while a turn runs, as on every platform: ``/queue`` shows the running
turn, ``/stop`` stops it now.

- Interactive (a TTY), lines are typed at a prompt_toolkit prompt (line editing, history)
  that stays open while turns run. A message typed during a turn reaches the router at once
  and steers it, as on the platforms.
- Piped, lines are read on a reader thread as they come; replies go to stdout, everything
  else to stderr, so it can be scripted. A script's messages are answered one at a time, in
  order: a message line is handed over once the previous message's turn ended, and a command
  line once the lines before it were handed over (``/stop`` after a message stops that
  message's turn).

In a terminal a reply shows while it is written (the channel's drafts): its finished lines
are printed as they come, the line being written shows above the prompt. Piped output gets
whole replies only, as before.

A file the agent sends (``send_file``) is saved as a copy in ``CLAWBOT_HOME/downloads/`` and
shown as a line with its name, size and the copy's path (``adapters.console_files``).

An approval request (a message with actions) is answered through the same reader: while one
is open, a short answer (``o``\\nce, ``s``\\ession, ``d``\\eny, yes, no) or a typed
``/approve``/``/deny`` with its id answers it, wherever it is among the lines waiting; any
other line is a message or a command like any other, never swallowed. At the end of input
nobody is left to say yes, so the requests still open, and any asked later, are denied.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import secrets
import sys
from collections import deque
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from adapters.console_attach import attach, is_attach, read_local
from adapters.console_files import DOWNLOADS, file_line, saved_copy
from adapters.console_input import LineReader, OpenRequest, answer_command
from clawbot.channels.interface import (
    Adapter,
    ChannelLimits,
    InboundHandler,
    SentMessage,
    StagedHandler,
)
from clawbot.errors import DeliveryError, InputError
from clawbot.messages import (
    Attachment,
    InboundMessage,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
    parse_command,
)
from clawbot.settings import Settings

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

log = logging.getLogger("clawbot.console")

CHANNEL = "console"
PROMPT = "you › "
ANSWER_HINT = "(answer with o = once, s = for this session or d = deny)"

__all__ = ["ConsoleAdapter", "answer_command", "decode_line", "to_inbound"]


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


def attached_inbound(text: str, *, chat_id: str, user: str) -> InboundMessage:
    """An ``/attach PATH [text]`` line as a message carrying the file (an InputError for a
    line or file that cannot be attached)."""
    attachment, said = attach(text.rstrip("\r\n"))
    return to_inbound(said, chat_id=chat_id, user=user).model_copy(
        update={"attachments": (attachment,)}
    )


def decode_line(raw: bytes) -> str | None:
    """The line as text, or None when it is not valid UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class _Line:
    number: int
    text: str


MAX_FILE_BYTES = 50 * 1024 * 1024
"""The biggest file the agent may send here (saved as a copy: see ``console_files``)."""


class ConsoleAdapter(Adapter):
    name = CHANNEL
    limits = ChannelLimits(
        max_message_chars=1_000_000,
        markup="plain",
        max_upload_bytes=MAX_FILE_BYTES,
        max_caption_chars=1_000_000,
    )

    def __init__(
        self,
        *,
        chat_id: str = "local",
        stdin: BinaryIO | None = None,
        stdout: TextIO | None = None,
        interactive: bool | None = None,
        downloads: Path | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.downloads = downloads
        """Where files the agent sends are saved (none: the chat takes no files)."""
        self._stdin = stdin if stdin is not None else sys.stdin.buffer
        self._stdout = stdout if stdout is not None else sys.stdout
        if interactive is None:
            interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self.interactive = interactive
        if interactive:  # a terminal shows a reply while it is written, in a draft
            self.limits = replace(self.limits, drafts=True)
        self._draft = ""  # the reply being written, as far as it came
        self._printed = 0  # how much of it was printed: its finished lines
        self.user = _user_name()
        self.finished = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._on_message: InboundHandler | None = None
        self._requests: list[OpenRequest] = []  # shown and not answered, oldest first
        self._answered: set[str] = set()  # message ids of requests answered from here
        self._input_ended = False
        self._lines_read = 0
        self._handling: set[asyncio.Task[None]] = set()
        self._waiting: deque[_Line] = deque()  # piped lines read and not handed over yet
        self._wake = asyncio.Event()
        self._reader: LineReader | None = None
        self._prompt: PromptSession[str] | None = None

    @classmethod
    def is_configured(cls, settings: Settings) -> bool:
        return True

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsoleAdapter:
        return cls(chat_id=settings.console_session, downloads=settings.home / DOWNLOADS)

    async def start(self, on_message: InboundHandler) -> None:
        self._on_message = on_message
        loop = self._terminal if self.interactive else self._piped
        self._task = asyncio.create_task(loop(on_message))
        self._task.add_done_callback(lambda _: self.finished.set())

    async def wait_closed(self) -> None:
        await self.finished.wait()

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.close()
        for task in list(self._handling):
            task.cancel()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.finished.set()

    # output ------------------------------------------------------------------------------

    @property
    def shows_live_replies(self) -> bool:
        return self.interactive

    async def send_draft(self, chat_id: str, draft_id: int, text: str) -> None:
        """Print the reply's lines as they are finished; the line being written shows above
        the prompt. A new text (the model's next round) starts again below what was printed."""
        if not self.interactive:
            await super().send_draft(chat_id, draft_id, text)
        if not text.startswith(self._draft[: self._printed]):
            self._printed = 0
        self._draft = text
        finished = text.rfind("\n", self._printed)
        if finished >= 0:
            self._show(text[self._printed : finished])
            self._printed = finished + 1
        self._redraw()

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        text = message.text.rstrip("\n")
        if self._draft:  # the reply that was shown while it was written: its rest
            if text.startswith(self._draft[: self._printed]):
                text = text[self._printed :]
            self._draft, self._printed = "", 0
            self._redraw()
        if not self._show(text):
            return []
        if not message.actions or self._on_message is None:
            return [SentMessage(channel=CHANNEL, chat_id=message.chat_id)]
        request = OpenRequest.of(secrets.token_hex(6), message.actions)
        self._requests.append(request)
        if self.interactive:
            self._redraw()
        else:
            print(ANSWER_HINT, file=sys.stderr, flush=True)
        if self._input_ended and (self.interactive or self._task is None or self._task.done()):
            self._deny_open()  # asked once the chat has no more input: nobody can say yes
        self._wake.set()  # piped: a line already waiting may answer it
        return [
            SentMessage(channel=CHANNEL, chat_id=message.chat_id, message_id=request.message_id)
        ]

    async def send_file(self, file: OutboundFile) -> list[SentMessage]:
        """A file the agent sent: a copy saved in the downloads folder (the workspace's may
        change or go away), and a line with its name, size and the copy's path."""
        if self.downloads is None:
            return await super().send_file(file)  # refused: nowhere to keep it
        path = await asyncio.to_thread(saved_copy, self.downloads, file)
        self._show(file_line(file, path))
        return [SentMessage(channel=CHANNEL, chat_id=file.chat_id)]

    async def edit(self, edit: OutboundEdit) -> None:
        """An approval request was answered or expired: it is no longer open. Its outcome is
        shown when it was not answered from here (the answer's reply said it then)."""
        request = next((r for r in self._requests if r.message_id == edit.message_id), None)
        if request is not None:
            self._requests.remove(request)
            self._redraw()
        if edit.message_id in self._answered:
            self._answered.discard(edit.message_id)
            return
        lines = edit.text.rstrip("\n").split("\n")
        self._show(f"{lines[0]}\n{lines[-1]}")  # the request's first line, then its outcome

    async def delete(self, deletion: OutboundDeletion) -> None:
        """An open approval request taken back: no answer typed from now on is taken for
        it. A terminal cannot take back a line it printed, so anything else is refused."""
        request = next((r for r in self._requests if r.message_id == deletion.message_id), None)
        if request is None:
            raise DeliveryError("a terminal cannot take back a line it printed")
        self._requests.remove(request)
        self._redraw()

    def _show(self, text: str) -> bool:
        """Print one message whole; False once the output is gone."""
        if self.interactive:
            from prompt_toolkit import print_formatted_text

            print_formatted_text(text)
            return True
        try:
            self._stdout.write(text + "\n")
            self._stdout.flush()
        except BrokenPipeError:
            self._output_closed()
            return False
        return True

    def _output_closed(self) -> None:
        """Whoever read our output is gone (``clawbot chat < in.txt | head -1``): further
        replies would go nowhere, so stop reading input and let the chat end quietly, as a
        shell pipeline expects."""
        if self._task is not None and not self._task.done():
            log.info("the output was closed: no more input is read")
            self._task.cancel()
        if self._reader is not None:
            self._reader.close()
        if self._stdout is sys.stdout:
            # Python flushes stdout again at exit; point it at /dev/null so that flush
            # cannot fail and print a BrokenPipeError of its own.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)

    # approvals ---------------------------------------------------------------------------

    def _answer_in(self, text: str) -> tuple[OpenRequest, str] | None:
        """The open request ``text`` answers (the oldest it fits) and the command it sends."""
        for request in self._requests:
            command = request.answer(text)
            if command is not None:
                return request, command
        return None

    def _take(self, request: OpenRequest) -> None:
        if request in self._requests:
            self._requests.remove(request)
        self._answered.add(request.message_id)
        self._redraw()

    def _deny_open(self) -> None:
        """Deny every open request (the input ended), each through its own command."""
        for request in list(self._requests):
            deny = next((a.command for a in request.actions if a.command.startswith("/deny")), None)
            self._take(request)
            if deny is not None and self._on_message is not None:
                self._spawn(self._deliver(self._on_message, deny, 0))

    def _redraw(self) -> None:
        if self._prompt is not None and self._prompt.app.is_running:
            self._prompt.app.invalidate()

    def _prompt_text(self) -> str:
        prompt = self._requests[0].prompt if self._requests else PROMPT
        writing = self._draft[self._printed :]
        return f"{writing}\n{prompt}" if writing else prompt

    # input -------------------------------------------------------------------------------

    async def _piped(self, on_message: InboundHandler) -> None:
        self._reader = LineReader(self._stdin, self._arrived, asyncio.get_running_loop())
        self._reader.start()
        running: asyncio.Task[None] | None = None  # the message whose turn runs
        while True:
            self._wake.clear()
            answered = self._waiting_answer()
            if answered is not None:
                line, request, command = answered
                self._taken(line)
                self._take(request)
                await self._deliver(on_message, command, line.number)
                continue
            if self._input_ended:
                self._deny_open()  # no line left answers them, and none will come
            if self._waiting:
                line = self._waiting[0]
                if parse_command(line.text) is not None and not is_attach(line.text):
                    self._taken(line)
                    await self._deliver(on_message, line.text, line.number)
                    continue
                if running is None or running.done():
                    self._taken(line)
                    running = await self._hand(on_message, line.text, line.number)
                    continue
            elif self._input_ended and not self._handling:
                return
            await self._wake.wait()

    def _arrived(self, raw: bytes | None) -> None:
        """A line from the reader thread (None: the end of input)."""
        if raw is None:
            self._input_ended = True
        else:
            self._lines_read += 1
            text = decode_line(raw)
            if text is None:
                print(
                    f"clawbot: line {self._lines_read} is not valid UTF-8 text and was skipped; "
                    "save your input as UTF-8",
                    file=sys.stderr,
                    flush=True,
                )
                if self._reader is not None:
                    self._reader.taken()
            else:
                self._waiting.append(_Line(self._lines_read, text))
        self._wake.set()

    def _waiting_answer(self) -> tuple[_Line, OpenRequest, str] | None:
        for line in self._waiting:
            found = self._answer_in(line.text)
            if found is not None:
                return line, *found
        return None

    def _taken(self, line: _Line) -> None:
        self._waiting.remove(line)
        if self._reader is not None:
            self._reader.taken()

    async def _terminal(self, on_message: InboundHandler) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        self._prompt = session = PromptSession[str]()
        print("clawbot chat — type /help for commands, Ctrl-D to quit.", file=sys.stderr)
        number = 0
        with patch_stdout():
            while True:
                try:
                    text = await session.prompt_async(self._prompt_text)
                except EOFError:
                    break
                except KeyboardInterrupt:
                    if self._handling:
                        raise  # Ctrl-C during a turn quits now, as it always has
                    break
                number += 1
                found = self._answer_in(text)
                if found is not None:
                    request, command = found
                    self._take(request)
                    await self._deliver(on_message, command, number)
                else:
                    await self._hand(on_message, text, number)
        self._input_ended = True
        self._deny_open()
        while self._handling:
            await asyncio.wait(set(self._handling))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._handling.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._handling.discard(finished)
            self._wake.set()

        task.add_done_callback(done)
        return task

    async def _hand(self, on_message: InboundHandler, text: str, number: int) -> asyncio.Task[None]:
        """Hand a message over without waiting for its turn; the task ends with the turn.
        With a staged handler (``clawbot chat``'s) this returns once the message is taken in,
        so the next line cannot overtake it."""
        if is_attach(text):
            try:
                message = attached_inbound(text, chat_id=self.chat_id, user=self.user)
            except InputError as exc:
                self._tell(f"clawbot: {exc.message}")
                return self._spawn(asyncio.sleep(0))
        else:
            message = to_inbound(text, chat_id=self.chat_id, user=self.user)
        if not isinstance(on_message, StagedHandler):
            return self._spawn(self._handled(on_message, message, number))
        try:
            outcome = await on_message.take(message)
        except Exception:
            log.exception("handling line %d failed", number)
            outcome = asyncio.sleep(0)
        return self._spawn(self._outcome(outcome, number))

    @staticmethod
    async def _outcome(outcome: Awaitable[object], number: int) -> None:
        try:
            await outcome
        except Exception:
            log.exception("handling line %d failed", number)

    async def _deliver(self, on_message: InboundHandler, text: str, number: int) -> None:
        message = to_inbound(text, chat_id=self.chat_id, user=self.user)
        await self._handled(on_message, message, number)

    async def _handled(
        self, on_message: InboundHandler, message: InboundMessage, number: int
    ) -> None:
        try:
            await on_message(message)
        except Exception:
            log.exception("handling line %d failed", number)

    def _tell(self, text: str) -> None:
        """A problem with what was typed: on stderr when piped (stdout holds replies)."""
        if self.interactive:
            self._show(text)
        else:
            print(text, file=sys.stderr, flush=True)

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """A file ``/attach`` named, read from the local disk off the event loop."""
        return await asyncio.to_thread(read_local, attachment, max_bytes)


def _user_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "user"
