"""The one outbound renderer: agent Markdown into each platform's own markup.

Agents write Markdown; Telegram wants a small HTML subset, Slack its own mrkdwn, Discord a
Markdown dialect. Rendering from markdown-it's parse tree (never regexes over the raw text)
means a stray ``<`` or ``*`` in the agent's prose can't turn into markup or a rejected
message. ``render_parts`` combines this with the chunker so every part fits its platform.
The tree and its walk are ``markdown_tree``; each platform's markup is a module of its own
(``telegram_html``, ``slack_mrkdwn``, ``discord_markdown``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from markdown_it.tree import SyntaxTreeNode

from clawbot.channels.chunking import split_markdown, utf16_length
from clawbot.channels.discord_markdown import render_discord
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.markdown_tree import PARSER, PLAIN, TreeRenderer
from clawbot.channels.slack_mrkdwn import SlackMrkdwnRenderer
from clawbot.channels.telegram_html import TelegramHtmlRenderer

Markup = Literal["plain", "telegram_html", "slack_mrkdwn", "discord_markdown"]
MARKUPS: tuple[Markup, ...] = get_args(Markup)


@dataclass(frozen=True)
class RenderedPart:
    """One deliverable message: ``text`` in ``markup``, ``plain`` to send if the platform
    rejects the formatting. Both fit the channel's limit."""

    text: str
    plain: str
    markup: Markup
    source: str = field(default="", compare=False)
    """The Markdown the part was rendered from: sent alone, it renders to this one part
    (how the chat's pacer sends a long reply one part a call)."""


def render(markdown: str, markup: Markup) -> str:
    """Render ``markdown`` for one platform (no length limit; see ``render_parts``)."""
    source = _normalize(markdown)
    return _render_source(source, SyntaxTreeNode(PARSER.parse(source)), markup)


def render_parts(markdown: str, limits: ChannelLimits) -> list[RenderedPart]:
    """Chunk then render, so that every part's text and plain fallback fit the limit.

    Rendering can grow a chunk (HTML escaping turns one ``<`` into four characters), so a
    chunk that renders too long is split again, smaller, until its pieces fit.
    """
    markup = as_markup(limits.markup)
    limit = limits.max_message_chars
    parts: list[RenderedPart] = []
    if limits.length_unit == "utf16":
        for chunk in split_markdown(markdown, limit, measure=utf16_length):
            _render_fitting_units(chunk, markup, limit, parts)
        return parts
    for chunk in split_markdown(markdown, limit):
        _render_fitting(chunk, markup, limit, parts)
    return parts


def render_caption(markdown: str, limits: ChannelLimits) -> RenderedPart | None:
    """A file's caption for one platform, None when there is none. A caption is one text
    beside the file, never split: one longer than ``limits.max_caption_chars`` is cut
    where the chunker would cut it, and ends with an ellipsis."""
    if not markdown.strip() or limits.max_caption_chars < 2:
        return None
    parts = render_parts(markdown, replace(limits, max_message_chars=limits.max_caption_chars - 1))
    if len(parts) < 2:
        return parts[0] if parts else None
    first = parts[0]
    return RenderedPart(text=first.text + "…", plain=first.plain + "…", markup=first.markup)


def _render_fitting_units(chunk: str, markup: Markup, limit: int, out: list[RenderedPart]) -> None:
    """``_render_fitting`` for a limit in UTF-16 code units: parts that fit in characters but
    not in code units (astral characters such as emoji count twice) are split again."""
    staged: list[RenderedPart] = []
    _render_fitting(chunk, markup, limit, staged)
    longest = max((max(utf16_length(p.text), utf16_length(p.plain)) for p in staged), default=0)
    if longest <= limit:
        out.extend(staged)
        return
    smaller = min(utf16_length(chunk) - 1, utf16_length(chunk) * limit * 9 // (longest * 10))
    if smaller < 2:
        raise ValueError(f"cannot render {chunk!r} as {markup} within {limit} UTF-16 units")
    for piece in split_markdown(chunk, smaller, measure=utf16_length):
        _render_fitting_units(piece, markup, limit, out)


def as_markup(name: str) -> Markup:
    """Validate a markup name from configuration."""
    if name not in MARKUPS:
        raise ValueError(f"unknown markup {name!r}; expected one of {', '.join(MARKUPS)}")
    return name


def _render_fitting(chunk: str, markup: Markup, limit: int, out: list[RenderedPart]) -> None:
    estimate = len(chunk) + _escape_growth(chunk, markup)
    if estimate > limit:
        _split_and_render(chunk, estimate, markup, limit, out)
        return
    source = _normalize(chunk)
    tree = SyntaxTreeNode(PARSER.parse(source))
    text = _render_source(source, tree, markup)
    plain = text if markup == "plain" else _render_source(source, tree, "plain")
    if not text.strip() or not plain.strip():
        if source.strip():
            out.append(_as_written(source))
        return
    longest = max(len(text), len(plain))
    if longest <= limit:
        out.append(RenderedPart(text=text, plain=plain, markup=markup, source=source))
    else:
        _split_and_render(chunk, longest, markup, limit, out)


def _as_written(source: str) -> RenderedPart:
    """A chunk the renderer would drop whole, sent as the agent wrote it, unformatted.

    Markdown can consume visible text: ``[writer]: Done.`` is a link reference definition,
    and an empty fence or a lone ``#`` renders nothing. Dropping such a chunk would lose a
    reply that was reported as sent, so it goes out as plain text instead."""
    text = source.strip()
    return RenderedPart(text=text, plain=text, markup="plain", source=text)


def _escape_growth(chunk: str, markup: Markup) -> int:
    """How much HTML-style escaping will lengthen ``chunk``: counted in C, parsing is slow."""
    if markup not in ("telegram_html", "slack_mrkdwn"):
        return 0
    return 3 * (chunk.count("<") + chunk.count(">")) + 4 * chunk.count("&")


def _split_and_render(
    chunk: str, rendered_length: int, markup: Markup, limit: int, out: list[RenderedPart]
) -> None:
    smaller = min(len(chunk) - 1, len(chunk) * limit * 9 // (rendered_length * 10))
    if smaller < 1:
        raise ValueError(f"cannot render {chunk!r} as {markup} within {limit} characters")
    for piece in split_markdown(chunk, smaller):
        _render_fitting(piece, markup, limit, out)


def _normalize(markdown: str) -> str:
    return markdown.replace("\r\n", "\n").replace("\r", "\n")


def _render_source(source: str, tree: SyntaxTreeNode, markup: Markup) -> str:
    if markup == "discord_markdown":
        return render_discord(source, tree)
    return _TREE_RENDERERS[markup].document(tree)


_TREE_RENDERERS: dict[Markup, TreeRenderer] = {
    "plain": PLAIN,
    "telegram_html": TelegramHtmlRenderer(),
    "slack_mrkdwn": SlackMrkdwnRenderer(),
}
