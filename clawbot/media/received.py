"""What becomes of a voice note, an audio file or a document a person sent, once, in the
turn that answers it: a line for the agent (the transcript keeps it) and, when something
went wrong, a line for the person.

- Voice notes and audio are transcribed; the agent reads the words with their provenance
  ("voice note, 12 s, transcribed: ..."). Without a speech-to-text model the person hears
  that voice is not set up.
- Documents are saved into the agent's inbox folder and named to it; a PDF's text is saved
  beside it (``report.pdf.txt``), where ``file_read`` reads it. An agent without a folder it
  can read (no file tools) gets the text in the turn instead, cut at ``INLINE_CHARS``.
- A file whose type (or name) says nothing taken, but that is not a video, is downloaded
  and saved as a text document when its bytes are text (``notes`` with no extension, a
  script sent as ``application/octet-stream``).
- Anything else is refused, naming what is taken.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from clawbot.agents.workspace import shown_path
from clawbot.errors import ClawbotError
from clawbot.media.fetching import Fetcher
from clawbot.media.inbox import inbox_of, save
from clawbot.media.kinds import Sorted, looks_like_text
from clawbot.media.names import safe_name
from clawbot.media.pdf import pdf_text
from clawbot.media.transcription import transcribe
from clawbot.messages import AttachmentBlock, human_size
from clawbot.runtime.metering import UsageMeter
from clawbot.security.reach import Reach
from clawbot.settings import Settings

INLINE_CHARS = 20_000
VOICE_NOT_SET_UP = (
    "Voice messages are not set up here: no speech-to-text model is configured "
    "(CLAWBOT_TRANSCRIPTION_MODEL), so I could not listen to your {what}."
)


@dataclass(frozen=True)
class Taken:
    """For the agent, what became of the file; for the person, what went wrong (if)."""

    line: str
    notice: str | None = None


@dataclass(frozen=True)
class Receiver:
    """Takes in one file at a time for a session whose workspace is ``root`` and whose
    reach is ``reach``."""

    settings: Settings
    fetcher: Fetcher
    root: Path
    reach: Reach
    meter: UsageMeter | None = None

    async def take(self, block: AttachmentBlock, sorted_as: Sorted) -> Taken:
        name = shown_path(block.name)
        if sorted_as.kind == "audio":
            return await self._listen(block, sorted_as.mime_type)
        if sorted_as.kind == "document" or sorted_as.sniff:
            try:
                data = await self.fetcher.fetch(
                    block, self.settings.attachment_max_bytes, "CLAWBOT_ATTACHMENT_MAX_BYTES"
                )
                if sorted_as.kind == "document" or looks_like_text(data):
                    return await self._save(block, sorted_as.mime_type, data)
            except ClawbotError as exc:
                told = f"I could not save {name}: {exc}."
                return Taken(f"{name}: not saved ({exc.message})", told)
        told = f"I can't use {name}: {sorted_as.reason}."
        return Taken(f"{name}: not used ({sorted_as.reason})", told)

    async def _listen(self, block: AttachmentBlock, mime: str) -> Taken:
        what = "voice note" if block.voice else f"audio file {shown_path(block.name)}"
        heard = what + (f", {round(block.duration)} s" if block.duration is not None else "")
        model = self.settings.transcription_model
        if not model:
            return Taken(
                f"{heard}: not transcribed (voice is not set up here)",
                VOICE_NOT_SET_UP.format(what=what),
            )
        try:
            data = await self.fetcher.fetch(
                block, self.settings.attachment_max_bytes, "CLAWBOT_ATTACHMENT_MAX_BYTES"
            )
            text = await transcribe(
                model, block.name, mime, data, self.settings.provider_timeout, self.meter
            )
        except ClawbotError as exc:
            return Taken(
                f"{heard}: could not be transcribed ({exc.message})",
                f"I could not transcribe your {what}: {exc}.",
            )
        return Taken(f"{heard}, transcribed: {text or '(no speech heard)'}")

    async def _save(self, block: AttachmentBlock, mime: str, data: bytes) -> Taken:
        name = shown_path(block.name)
        is_pdf = mime == "application/pdf"
        home = self.reach.home  # a folder of its own only when it reaches files at all
        if home is None:
            return await self._inline(name, data, is_pdf)
        folder = inbox_of(home)

        def check(relative: str) -> None:
            self.reach.check(relative, folder, write=False)

        path = await asyncio.to_thread(save, self.root, folder, safe_name(block.name), data, check)
        if not is_pdf:
            return Taken(f"saved {name} as {path} ({human_size(len(data))})")
        try:
            text = await asyncio.to_thread(pdf_text, name, data)
        except ClawbotError as exc:
            return Taken(
                f"saved {name} as {path}; its text could not be read ({exc.message})",
                f"I saved {name}, but could not read its text: {exc.message}.",
            )
        beside = await asyncio.to_thread(
            save, self.root, folder, f"{Path(path).name}.txt", text.text.encode(), check
        )
        return Taken(f"saved {name} as {path} ({_pages(text.pages)}; its text is in {beside})")

    async def _inline(self, name: str, data: bytes, is_pdf: bool) -> Taken:
        """For an agent without a folder it can read: the text itself, cut."""
        text = (
            (await asyncio.to_thread(pdf_text, name, data)).text
            if is_pdf
            else data.decode("utf-8", errors="replace")
        )
        cut = text[:INLINE_CHARS]
        more = ""
        if cut != text:
            more = f"\n[cut: the first {INLINE_CHARS:,} of {len(text):,} characters]"
        return Taken(f"{name} (this agent has no file tools, so its text follows):\n{cut}{more}")


def _pages(count: int) -> str:
    return "1 page" if count == 1 else f"{count} pages"
