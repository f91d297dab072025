"""The one outbound renderer: agent Markdown into each platform's own markup.

Agents write Markdown; Telegram wants a small HTML subset, Slack its own mrkdwn, Discord a
Markdown dialect. Rendering from markdown-it's parse tree (never regexes over the raw text)
means a stray ``<`` or ``*`` in the agent's prose can't turn into markup or a rejected
message. ``render_parts`` combines this with the chunker so every part fits its platform.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline.autolink import autolink
from markdown_it.tree import SyntaxTreeNode

from clawbot.channels.chunking import split_markdown, utf16_length
from clawbot.channels.interface import ChannelLimits

Markup = Literal["plain", "telegram_html", "slack_mrkdwn", "discord_markdown"]
MARKUPS: tuple[Markup, ...] = get_args(Markup)


def _autolink_when_closed(state: StateInline, silent: bool) -> bool:
    """markdown-it's autolink rule, skipped fast when no ``>`` closes the ``<``.

    The stock rule walks characters in Python up to the next ``<`` or ``>``, so prose full
    of ``a < b`` comparisons costs quadratic time; ``str.find`` rules those out in C.
    """
    source, start = state.src, state.pos
    if source[start] != "<":
        return False
    close = source.find(">", start + 1, state.posMax)
    if close < 0 or source.find("<", start + 1, close) >= 0:
        return False
    return autolink(state, silent)


_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
"""Built once: constructing a parser costs far more than parsing a chat message.

Raw HTML is off, so any HTML in the agent's text arrives as text and gets escaped."""
_PARSER.inline.ruler.at("autolink", _autolink_when_closed)

_RULE = "———"
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_CODE_LANGUAGE = re.compile(r"[\w#+.-]+")
_DISCORD_SPECIAL = re.compile(r"([\\*_~`])")
_BACKTICK_RUN = re.compile(r"`+")


@dataclass(frozen=True)
class RenderedPart:
    """One deliverable message: ``text`` in ``markup``, ``plain`` to send if the platform
    rejects the formatting. Both fit the channel's limit."""

    text: str
    plain: str
    markup: Markup


def render(markdown: str, markup: Markup) -> str:
    """Render ``markdown`` for one platform (no length limit; see ``render_parts``)."""
    source = _normalize(markdown)
    return _render_source(source, SyntaxTreeNode(_PARSER.parse(source)), markup)


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
    tree = SyntaxTreeNode(_PARSER.parse(source))
    text = _render_source(source, tree, markup)
    plain = text if markup == "plain" else _render_source(source, tree, "plain")
    if not text.strip() or not plain.strip():
        if source.strip():
            out.append(_as_written(source))
        return
    longest = max(len(text), len(plain))
    if longest <= limit:
        out.append(RenderedPart(text=text, plain=plain, markup=markup))
    else:
        _split_and_render(chunk, longest, markup, limit, out)


def _as_written(source: str) -> RenderedPart:
    """A chunk the renderer would drop whole, sent as the agent wrote it, unformatted.

    Markdown can consume visible text: ``[writer]: Done.`` is a link reference definition,
    and an empty fence or a lone ``#`` renders nothing. Dropping such a chunk would lose a
    reply that was reported as sent, so it goes out as plain text instead."""
    text = source.strip()
    return RenderedPart(text=text, plain=text, markup="plain")


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
        return _render_discord(source, tree)
    return _TREE_RENDERERS[markup].document(tree)


class _TreeRenderer:
    """Walks the parse tree; subclasses say how each construct looks on their platform."""

    def escape(self, text: str) -> str:
        return text

    def strong(self, inner: str) -> str:
        return inner

    def emphasis(self, inner: str) -> str:
        return inner

    def strikethrough(self, inner: str) -> str:
        return inner

    def code_span(self, code: str) -> str:
        return code

    def link(self, href: str, label: SyntaxTreeNode) -> str:
        text = _PLAIN.inline(label)
        if not href or text == href or f"mailto:{text}" == href:
            return text
        return f"{text} ({href})"

    def image(self, src: str, alt: str) -> str:
        return f"{alt} ({src})" if alt else src

    def heading(self, inner: str) -> str:
        return inner

    def code_block(self, code: str, language: str) -> str:
        return code

    def quote(self, body: str) -> str:
        return _prefix_lines(body, "> ")

    def table(self, aligned: str) -> str:
        return aligned

    def document(self, root: SyntaxTreeNode) -> str:
        return self.blocks(root.children, "\n\n").strip("\n")

    def blocks(self, nodes: list[SyntaxTreeNode], separator: str) -> str:
        rendered = (self.block(node) for node in nodes)
        return separator.join(text for text in rendered if text)

    def block(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "paragraph":
            return self.inline(node.children[0]) if node.children else ""
        if kind == "heading":
            title = self.heading_inline(node.children[0]) if node.children else ""
            return self.heading(title) if title.strip() else ""
        if kind in ("bullet_list", "ordered_list"):
            return self.list_block(node)
        if kind == "blockquote":
            quoted = self.blocks(node.children, "\n")
            return self.quote(quoted) if quoted.strip() else ""
        if kind in ("fence", "code_block"):
            code = node.content.rstrip("\n")
            language = node.info.strip().split(" ", 1)[0] if kind == "fence" else ""
            return self.code_block(code, language) if code.strip() else ""
        if kind == "hr":
            return _RULE
        if kind == "table":
            return self.table(_aligned_table(node))
        return self.escape(node.content)

    def list_block(self, node: SyntaxTreeNode) -> str:
        ordered = node.type == "ordered_list"
        number = int(node.attrs.get("start", 1)) if ordered else 0
        lines: list[str] = []
        for item in node.children:
            marker = f"{number}. " if ordered else "• "
            number += 1
            body = self.blocks(item.children, "\n").split("\n")
            lines.append(marker + body[0])
            indent = " " * len(marker)
            lines.extend(indent + line if line else line for line in body[1:])
        return "\n".join(lines)

    def inline(self, node: SyntaxTreeNode) -> str:
        return "".join(self.inline_node(child) for child in node.children)

    def heading_inline(self, node: SyntaxTreeNode) -> str:
        """A heading's content; platforms whose bold can't nest drop inner bold here."""
        return self.inline(node)

    def inline_node(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "text":
            return self.escape(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            return self.code_span(node.content)
        if kind == "strong":
            return self.strong(self.inline(node))
        if kind == "em":
            return self.emphasis(self.inline(node))
        if kind == "s":
            return self.strikethrough(self.inline(node))
        if kind == "link":
            return self.link(str(node.attrs.get("href", "")), node)
        if kind == "image":
            return self.image(str(node.attrs.get("src", "")), _PLAIN.inline(node))
        return self.escape(node.content)


class _PlainRenderer(_TreeRenderer):
    """Readable text with the markup gone: the fallback when a platform rejects formatting."""


class _TelegramHtmlRenderer(_TreeRenderer):
    """Telegram Bot API ``parse_mode=HTML``: a handful of tags, everything else escaped."""

    def escape(self, text: str) -> str:
        return _escape_html(text)

    def strong(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def emphasis(self, inner: str) -> str:
        return f"<i>{inner}</i>"

    def strikethrough(self, inner: str) -> str:
        return f"<s>{inner}</s>"

    def code_span(self, code: str) -> str:
        return f"<code>{_escape_html(code)}</code>"

    def link(self, href: str, label: SyntaxTreeNode) -> str:
        inner = self.inline(label) or _escape_html(href)
        if not _URL_SCHEME.match(href):
            return _escape_html(super().link(href, label)) if href else inner
        return f'<a href="{_escape_html(href, quote=True)}">{inner}</a>'

    def image(self, src: str, alt: str) -> str:
        if not _URL_SCHEME.match(src):
            return _escape_html(super().image(src, alt))
        return f'<a href="{_escape_html(src, quote=True)}">{_escape_html(alt or src)}</a>'

    def heading(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def code_block(self, code: str, language: str) -> str:
        if _CODE_LANGUAGE.fullmatch(language):
            return f'<pre><code class="language-{language}">{_escape_html(code)}</code></pre>'
        return f"<pre>{_escape_html(code)}</pre>"

    def quote(self, body: str) -> str:
        return f"<blockquote>{body}</blockquote>"

    def table(self, aligned: str) -> str:
        return f"<pre>{_escape_html(aligned)}</pre>"


class _SlackMrkdwnRenderer(_TreeRenderer):
    """Slack ``mrkdwn``: its own emphasis syntax, ``<url|text>`` links, &amp;-style escapes."""

    def escape(self, text: str) -> str:
        return _escape_html(text)

    def strong(self, inner: str) -> str:
        return f"*{inner}*"

    def emphasis(self, inner: str) -> str:
        return f"_{inner}_"

    def strikethrough(self, inner: str) -> str:
        return f"~{inner}~"

    def code_span(self, code: str) -> str:
        return f"`{_escape_html(code)}`"

    def link(self, href: str, label: SyntaxTreeNode) -> str:
        text = _PLAIN.inline(label)
        if not _URL_SCHEME.match(href):
            return _escape_html(super().link(href, label))
        return _slack_link(href, text)

    def image(self, src: str, alt: str) -> str:
        if not _URL_SCHEME.match(src):
            return _escape_html(super().image(src, alt))
        return _slack_link(src, alt)

    def heading(self, inner: str) -> str:
        return f"*{inner}*"

    def heading_inline(self, node: SyntaxTreeNode) -> str:
        return _SLACK_HEADING_INLINE.inline(node)

    def code_block(self, code: str, language: str) -> str:
        return f"```\n{_escape_html(code)}\n```"

    def table(self, aligned: str) -> str:
        return f"```\n{_escape_html(aligned)}\n```"


class _SlackHeadingInlineRenderer(_SlackMrkdwnRenderer):
    def strong(self, inner: str) -> str:
        return inner


_SLACK_HEADING_INLINE = _SlackHeadingInlineRenderer()
_PLAIN = _PlainRenderer()
_TREE_RENDERERS: dict[Markup, _TreeRenderer] = {
    "plain": _PLAIN,
    "telegram_html": _TelegramHtmlRenderer(),
    "slack_mrkdwn": _SlackMrkdwnRenderer(),
}


def _escape_html(text: str, *, quote: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


def _slack_link(url: str, text: str) -> str:
    target = _escape_html(url.replace("|", "%7C"))
    if not text or text == url or f"mailto:{text}" == url:
        return f"<{target}>"
    return f"<{target}|{_escape_html(text)}>"


def _prefix_lines(body: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in body.split("\n"))


def _aligned_table(table: SyntaxTreeNode) -> str:
    """A Markdown table as monospace rows, since no chat platform renders tables."""
    rows: list[list[str]] = []
    for section in table.children:
        for row in section.children:
            cells = (
                _PLAIN.inline(cell.children[0]) if cell.children else "" for cell in row.children
            )
            rows.append([" ".join(cell.split()) for cell in cells])
    if not rows:
        return ""
    columns = max(len(row) for row in rows)
    widths = [max((len(row[i]) for row in rows if i < len(row)), default=0) for i in range(columns)]
    lines = [
        " | ".join(
            (row[i] if i < len(row) else "").ljust(widths[i]) for i in range(columns)
        ).rstrip()
        for row in rows
    ]
    if table.children and table.children[0].type == "thead":
        lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def _render_discord(source: str, tree: SyntaxTreeNode) -> str:
    """Keep the agent's Markdown as written and rewrite only what Discord can't show.

    Passing source through keeps Discord's own syntax (``||spoilers||``, ``__underline__``)
    intact; top-level blocks Discord lacks are rebuilt from the parse tree.
    """
    lines = source.split("\n")
    out: list[str] = []
    cursor = 0
    for block in tree.children:
        if block.map is None:
            continue
        replacement = _discord_replacement(block)
        if replacement is None:
            continue
        start, end = block.map
        out.extend(lines[cursor:start])
        out.append(replacement)
        cursor = end
    out.extend(lines[cursor:])
    return "\n".join(out).strip("\n")


def _discord_replacement(block: SyntaxTreeNode) -> str | None:
    """The Discord version of a top-level block, or None to keep its source lines."""
    if block.type == "table":
        aligned = _aligned_table(block)
        fence = "`" * max(3, _longest_backtick_run(aligned) + 1)
        return f"{fence}\n{aligned}\n{fence}"
    if not block.children or block.children[0].type != "inline":
        return None
    inline = block.children[0]
    has_image = _contains(inline, "image")
    if block.type == "heading":
        level = int(block.tag[1])
        setext = block.markup in ("=", "-")
        if level <= 3 and not setext and not has_image:
            return None
        if level > 3 and _contains(inline, "strong"):
            text = _DISCORD_BOLD_INLINE.inline(inline)
        elif has_image:
            text = _DISCORD_INLINE.inline(inline)
        else:
            text = inline.content.strip()
        text = " ".join(text.split("\n"))
        return f"{'#' * level} {text}" if level <= 3 else f"**{text}**"
    if block.type == "paragraph" and has_image:
        return _DISCORD_INLINE.inline(inline)
    return None


def _contains(node: SyntaxTreeNode, kind: str) -> bool:
    return any(child.type == kind or _contains(child, kind) for child in node.children)


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)


class _DiscordInlineRenderer(_TreeRenderer):
    """Re-emits inline Markdown for the few blocks Discord output has to rebuild."""

    def escape(self, text: str) -> str:
        return _DISCORD_SPECIAL.sub(r"\\\1", text)

    def strong(self, inner: str) -> str:
        return f"**{inner}**"

    def emphasis(self, inner: str) -> str:
        return f"*{inner}*"

    def strikethrough(self, inner: str) -> str:
        return f"~~{inner}~~"

    def code_span(self, code: str) -> str:
        ticks = "`" * (_longest_backtick_run(code) + 1)
        padding = " " if code.startswith("`") or code.endswith("`") else ""
        return f"{ticks}{padding}{code}{padding}{ticks}"

    def link(self, href: str, label: SyntaxTreeNode) -> str:
        if label.markup == "autolink":
            return f"<{href}>"
        return f"[{self.inline(label)}]({href})"

    def image(self, src: str, alt: str) -> str:
        return f"[{self.escape(alt)}]({src})" if alt else src


_DISCORD_INLINE = _DiscordInlineRenderer()


class _DiscordBoldInlineRenderer(_DiscordInlineRenderer):
    """Inline content of a heading turned bold, where nested bold would cancel out."""

    def strong(self, inner: str) -> str:
        return inner


_DISCORD_BOLD_INLINE = _DiscordBoldInlineRenderer()
