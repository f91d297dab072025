"""The text of a PDF a person sent, with pypdf (pure Python, BSD, well kept): saved beside
the PDF so the agent's ``file_read`` can read it (a PDF's own bytes read as noise)."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

from clawbot.errors import InputError

MAX_PAGES = 500
"""Pages whose text is extracted; a longer PDF's text ends with a note saying where."""
MAX_CHARS = 2_000_000

log = logging.getLogger("clawbot.media")


@dataclass(frozen=True)
class PdfText:
    pages: int
    text: str


def pdf_text(name: str, data: bytes) -> PdfText:
    """The text of each page, pages parted by a form feed line; an InputError saying so for
    a file that is not a readable PDF (damaged, or locked with a password). Slow for a big
    file: run it on a worker thread."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InputError(f"{name} is locked with a password, so I cannot read its text")
        pages = len(reader.pages)
        parts: list[str] = []
        size = 0
        for number, page in enumerate(reader.pages[:MAX_PAGES], 1):
            text = page.extract_text() or ""
            parts.append(f"--- page {number} ---\n{text.strip()}")
            size += len(parts[-1])
            if size > MAX_CHARS:
                break
    except InputError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        log.info("could not read the PDF %s: %s", name, exc)
        raise InputError(f"{name} is not a PDF I can read ({type(exc).__name__})") from None
    if len(parts) < pages:
        parts.append(f"[the text ends here: page {len(parts)} of {pages}]")
    return PdfText(pages=pages, text="\n\n".join(parts)[: MAX_CHARS + 200])
