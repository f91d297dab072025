"""A memory's text cut into the pieces that are embedded one by one for semantic recall.

An embedding of a long text is the blur of everything in it, so a long memory is cut along
its Markdown headings first, then its paragraphs, then (a paragraph longer than the cap) at
word boundaries; pieces under one heading are packed together up to ``MAX_CHUNK_CHARS``.
Each piece keeps its heading, and every piece starts with the memory's key, so a piece read
alone still says what it is about. A search hit on any piece is a hit on its memory."""

from __future__ import annotations

import itertools
import re

MAX_CHUNK_CHARS = 800
_HEADING = re.compile(r"^#{1,6}\s+\S", re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def chunks(text: str, max_chars: int = MAX_CHUNK_CHARS) -> list[str]:
    """The pieces of ``text``, in order, each at most ``max_chars`` (about; a heading is
    repeated in front of the pieces under it); one piece for a short text."""
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    found: list[str] = []
    for section in _sections(text):
        heading, _, body = section.partition("\n")
        if not _HEADING.match(heading):
            heading, body = "", section
        found += _pack(heading.strip(), _pieces(body, max_chars), max_chars)
    return found


def embedded_texts(key: str, text: str, max_chars: int = MAX_CHUNK_CHARS) -> list[str]:
    """What is embedded for a memory: each piece of its text after its key."""
    name = key.replace("-", " ").replace("_", " ")
    return [f"{name}: {piece}" for piece in chunks(text, max_chars)] or [name]


def _sections(text: str) -> list[str]:
    """``text`` cut before each heading line (a part before the first heading too)."""
    starts = [match.start() for match in _HEADING.finditer(text)]
    bounds = [0, *[start for start in starts if start > 0], len(text)]
    parts = (text[a:b].strip() for a, b in itertools.pairwise(bounds))
    return [part for part in parts if part]


def _pieces(body: str, max_chars: int) -> list[str]:
    """Paragraphs of ``body``; one longer than ``max_chars`` cut at word boundaries."""
    found: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(body):
        paragraph = paragraph.strip()
        while len(paragraph) > max_chars:
            cut = paragraph.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            found.append(paragraph[:cut].strip())
            paragraph = paragraph[cut:].strip()
        if paragraph:
            found.append(paragraph)
    return found


def _pack(heading: str, pieces: list[str], max_chars: int) -> list[str]:
    """Consecutive pieces joined while they fit, each result under ``heading``."""
    packed: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 2 + len(piece) > max_chars:
            packed.append(current)
            current = piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        packed.append(current)
    if not packed and heading:
        return [heading]
    return [f"{heading}\n\n{piece}" if heading else piece for piece in packed]
