"""The harness clawbot's own stand-ins fulfil: the shipped ``PlatformHarness`` (what the
conformance suite in ``clawbot.testing.conformance`` drives) plus buttons and private answers, for
tests/test_approval_buttons.py, files the bot uploads, for tests/test_files_out.py, and files
people send, for tests/test_media_platforms.py."""

from __future__ import annotations

import asyncio
from typing import Protocol

from clawbot.channels.harness import PlatformHarness, SentRecord

from .uploads import ReceivedFile

__all__ = [
    "ButtonHarness",
    "FileHarness",
    "MediaHarness",
    "PlatformHarness",
    "ReceivedFile",
    "SentRecord",
]


class ButtonHarness(PlatformHarness, Protocol):
    """A stand-in whose platform has buttons under messages and answers shown to one person."""

    def buttons(self, record: SentRecord) -> list[tuple[str, str]]:
        """(label, command) of each button under a message the bot sent."""

    def shown(self, record: SentRecord) -> SentRecord:
        """A message the bot sent as the platform shows it now (after any edit): its text,
        and its buttons through :meth:`buttons`."""

    def delete(self, record: SentRecord) -> None:
        """Delete a message the bot sent, as a person with the right to would."""

    def private_answers(self) -> list[tuple[str, str]]:
        """(user id, text) of each answer the bot showed one person alone, in order: a Slack
        ephemeral message, a Telegram callback query's answer, a Discord ephemeral
        interaction message."""

    async def wait_private(self, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        """Wait until the bot showed at least ``count`` private answers; return them all."""

    async def press(
        self, record: SentRecord, label: str, *, sender_id: str = "1001", sender_name: str = "Ann"
    ) -> object:
        """Press a button under a message the bot sent, as ``sender_id``, the way the platform
        delivers it; returns once the bot acknowledged the press as the platform requires (an
        AssertionError if it did not)."""


class FileHarness(PlatformHarness, Protocol):
    """A stand-in that takes uploads as its platform does, within its size limit."""

    upload_limit: int
    """The biggest file the stand-in takes, as the platform's limit (a test may lower it)."""

    def received_files(self) -> list[ReceivedFile]:
        """The files the bot uploaded, in order."""

    async def wait_files(self, count: int, timeout: float = 5.0) -> list[ReceivedFile]:
        """Wait until the bot uploaded at least ``count`` files; return them all."""


class MediaHarness(PlatformHarness, Protocol):
    """A stand-in that serves the files people send, as its platform does (each message is a
    DM from the default sender)."""

    async def send_image(self, data: bytes, *, caption: str = "") -> None:
        """A photo or image attachment (``image.jpg``, JPEG where the platform says a type)."""

    async def send_voice(self, data: bytes, *, seconds: int) -> None:
        """A voice note the platform says lasts ``seconds``."""

    async def send_file(self, data: bytes, name: str, mime_type: str, *, caption: str = "") -> None:
        """A document under the sender's ``name``."""

    def lose_files(self) -> None:
        """The platform stops serving every file sent so far (Telegram: the file id is
        unknown; Discord: the signed URLs expired; Slack: the files were deleted)."""

    def hold_downloads(self, release: asyncio.Event) -> None:
        """File downloads wait until ``release`` is set (a slow file server)."""
