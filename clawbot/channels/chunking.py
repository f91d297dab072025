"""Split agent Markdown into platform-sized chunks without breaking its structure.

Every platform caps message length, and a reply cut at an arbitrary character leaves a
dangling code fence that turns the rest of the conversation into code. So we cut at the
gentlest boundary that fits: paragraph, then line, then sentence, then word, and only as a
last resort inside a word. A fenced code block that must be cut is closed at the end of one
chunk and reopened, with its language, at the start of the next.

Chunks are packed full: a block that fits a message of its own is never split (it starts the
next chunk if the current one has no room), but a block too big for any message is cut so
that its first part fills what is left of the current chunk, instead of leaving a short
chunk (``Part one.``) before it.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from markdown_it import MarkdownIt

_BLOCK_PARSER = (
    MarkdownIt("commonmark", {"html": False}).enable("table").disable(["inline", "reference"])
)
"""Block structure is all the chunker needs; skipping inline parsing keeps it cheap."""

_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")
_LINE_BREAK = re.compile(r"\n")
_SENTENCE_END = re.compile(r"(?:[.!?…][)\]\"'”’»]*\s+|[。！？]\s*)")
_WORD_GAP = re.compile(r"\s+")
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")

Splitter = Callable[[str, int], list["Piece"]]
"""Cuts a piece too big for one chunk into finer pieces, given the room left in the current
chunk (a splitter that has to cut mid-line or mid-word fills exactly that room)."""
Piece = tuple[str, Splitter]
Measure = Callable[[str], int]
"""How a platform counts message length: ``len`` (code points) or, say, UTF-16 code units."""


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts: characters beyond U+FFFF (most emoji)
    count twice."""
    return len(text.encode("utf-16-le")) // 2


@dataclass(frozen=True)
class _Fence:
    """A fenced code block found by the parser, as source lines."""

    header: str  # the opening line exactly as written, e.g. "```python" or "> ~~~ js"
    reopen: str  # the opening line to start a continuation chunk with
    close: str  # the closing line to end an interrupted chunk with
    body: tuple[str, ...]
    closing_line: str | None  # as written; None when the source never closed the fence

    def render(self, body_lines: list[str], *, first: bool, last: bool) -> str:
        opening = self.header if first else self.reopen
        closing = self.closing_line if (last and self.closing_line is not None) else self.close
        return "\n".join([opening, *body_lines, closing])


def split_markdown(text: str, limit: int, *, measure: Measure = len) -> list[str]:
    """Cut ``text`` into chunks of at most ``limit`` (as ``measure`` counts, characters by
    default) at natural boundaries.

    Chunks are trimmed of surrounding blank space; whitespace-only input gives ``[]``.
    """
    if limit < 1:
        raise ValueError(f"chunk limit must be positive, got {limit}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if measure(text) <= limit:
        trimmed = _trim(text)
        return [trimmed] if trimmed else []
    chunks = _pack(_top_level_pieces(text, limit, measure), limit, measure)
    return [trimmed for chunk in chunks if (trimmed := _trim(chunk))]


def _trim(chunk: str) -> str:
    """Drop blank lines at the start (keeping the first line's indentation) and space at the end."""
    return _LEADING_BLANK_LINES.sub("", chunk.rstrip())


def _top_level_pieces(text: str, limit: int, measure: Measure) -> list[Piece]:
    """Paragraphs of prose and whole fenced blocks, each with how to split it if it's too big."""
    lines = text.split("\n")
    fences = _find_fences(text, lines) if ("```" in text or "~~~" in text) else []
    prose_splitter = partial(_split_prose, limit=limit, level=1, measure=measure)
    pieces: list[Piece] = []
    cursor = 0
    for start, end, fence in fences:
        if start > cursor:
            prose = "\n".join(lines[cursor:start]) + "\n"
            pieces.extend((part, prose_splitter) for part in _split_after(prose, _PARAGRAPH_BREAK))
        block = "\n".join(lines[start:end]) + ("\n" if end < len(lines) else "")
        pieces.append((block, partial(_split_fence, fence=fence, limit=limit, measure=measure)))
        cursor = end
    if cursor < len(lines):
        prose = "\n".join(lines[cursor:])
        pieces.extend((part, prose_splitter) for part in _split_after(prose, _PARAGRAPH_BREAK))
    return pieces


def _find_fences(text: str, lines: list[str]) -> list[tuple[int, int, _Fence]]:
    """Locate fenced code blocks (also inside lists and quotes) by their source line ranges."""
    found: list[tuple[int, int, _Fence]] = []
    for token in _BLOCK_PARSER.parse(text):
        if token.type != "fence" or token.map is None:
            continue
        start, end = token.map
        header = lines[start]
        marker_at = header.find(token.markup)
        if marker_at < 0:
            continue
        prefix = header[:marker_at]
        continuation_prefix = "".join(ch if ch == ">" else " " for ch in prefix)
        info = header[marker_at + len(token.markup) :]
        closed = end - start >= 2 and _is_closing_fence(lines[end - 1], token.markup)
        body_end = end - 1 if closed else end
        fence = _Fence(
            header=header,
            reopen=continuation_prefix + token.markup + info,
            close=continuation_prefix + token.markup,
            body=tuple(lines[start + 1 : body_end]),
            closing_line=lines[end - 1] if closed else None,
        )
        found.append((start, end, fence))
    return found


def _is_closing_fence(line: str, markup: str) -> bool:
    marker = line.lstrip(" \t>").rstrip()
    return len(marker) >= len(markup) and set(marker) == {markup[0]}


def _split_after(text: str, boundary: re.Pattern[str]) -> list[str]:
    """Split after each boundary match, so the parts concatenate back to ``text`` exactly."""
    parts: list[str] = []
    start = 0
    for match in boundary.finditer(text):
        if match.end() > start:
            parts.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


_PROSE_BOUNDARIES = (_PARAGRAPH_BREAK, _LINE_BREAK, _SENTENCE_END, _WORD_GAP)


def _split_prose(
    text: str, room: int, *, limit: int, level: int, measure: Measure = len
) -> list[Piece]:
    """Split at the gentlest boundary kind from ``level`` on that yields more than one part;
    each part can be split again at the next finer kind. Text with no boundary at all is cut
    inside a word, filling ``room`` first."""
    for depth in range(level, len(_PROSE_BOUNDARIES)):
        parts = _split_after(text, _PROSE_BOUNDARIES[depth])
        if len(parts) > 1:
            finer = partial(_split_prose, limit=limit, level=depth + 1, measure=measure)
            return [(part, finer) for part in parts]
    first = room if 0 < room < limit else limit
    return [(part, _unsplittable) for part in _hard_split(text, limit, measure, first=first)]


def _unsplittable(text: str, room: int) -> list[Piece]:
    """The splitter of pieces already cut to fit a chunk; ``_pack`` never calls it."""
    raise AssertionError("a piece cut to fit a chunk was too big for one")


def _hard_split(text: str, limit: int, measure: Measure = len, *, first: int = 0) -> list[str]:
    """Cut anywhere: the first segment at most ``first`` wide (``limit`` if not given), the
    rest at most ``limit``."""
    width = first or limit
    if measure is len:
        parts = [text[:width]] if width < limit else []
        rest = text[len(parts[0]) :] if parts else text
        return parts + [rest[i : i + limit] for i in range(0, len(rest), limit)]
    parts = []
    start = size = 0
    for index, char in enumerate(text):
        char_width = measure(char)
        if size + char_width > width and index > start:
            parts.append(text[start:index])
            start, size, width = index, 0, limit
        size += char_width
    parts.append(text[start:])
    return parts


def _split_fence(
    block: str, room: int, *, fence: _Fence, limit: int, measure: Measure = len
) -> list[Piece]:
    """Cut a code block by lines, closing and reopening the fence around every cut; the first
    part fills ``room`` when at least one line fits there."""
    overhead = max(measure(fence.header), measure(fence.reopen)) + 1
    overhead += max(measure(fence.close), measure(fence.closing_line or "")) + 1
    budget = limit - overhead
    if budget < 1:
        return _split_prose(block, room, limit=limit, level=1, measure=measure)
    segments: list[str] = []
    for line in fence.body:
        segments.extend(_hard_split(line, budget, measure) if measure(line) > budget else [line])
    first_budget = room - overhead
    if not segments or first_budget < measure(segments[0]):
        first_budget = budget
    line_groups: list[list[str]] = []
    current: list[str] = []
    size, group_budget = -1, first_budget
    for segment in segments:
        width = measure(segment)
        if current and size + 1 + width > group_budget:
            line_groups.append(current)
            current, size, group_budget = [], -1, budget
        current.append(segment)
        size += 1 + width
    line_groups.append(current)
    last = len(line_groups) - 1
    parts = [
        fence.render(group, first=index == 0, last=index == last) + "\n"
        for index, group in enumerate(line_groups)
    ]
    trailing = block[len(block.rstrip()) :]
    parts[-1] = parts[-1].rstrip("\n") + trailing
    return [(part, _unsplittable) for part in parts]


def _pack(pieces: list[Piece], limit: int, measure: Measure = len) -> list[str]:
    """Greedily join consecutive pieces while they fit. A piece that fits a chunk of its own
    starts the next chunk when this one is full; one too big for any chunk is split into finer
    pieces that go on filling this one.

    Returned chunks keep their trailing whitespace so they still concatenate to the input;
    each chunk's text, trailing whitespace aside, is at most ``limit`` characters.
    """
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    queue = deque(pieces)
    while queue:
        text, split = queue.popleft()
        needed = measure(text.rstrip())
        if size + needed <= limit:
            current.append(text)
            size += measure(text)
        elif needed <= limit:
            if current:
                chunks.append("".join(current))
            current, size = [text], measure(text)
        else:
            queue.extendleft(reversed(split(text, limit - size)))
    if current:
        chunks.append("".join(current))
    return chunks
