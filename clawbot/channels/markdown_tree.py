"""The parse tree every markup is rendered from, and the walk over it they share.

markdown-it parses the agent's Markdown once (raw HTML off, so HTML arrives as text); a
``TreeRenderer`` walks the tree, and each platform's renderer (``telegram_html``,
``slack_mrkdwn``, ``discord_markdown``) says only how each construct looks there. ``PLAIN``
is the readable text with the markup gone, the fallback when a platform rejects formatting.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline.autolink import autolink
from markdown_it.tree import SyntaxTreeNode


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


PARSER = (
    MarkdownIt("commonmark", {"html": False})
    .enable(["table", "strikethrough"])
    .disable("reference")
)
"""Built once: constructing a parser costs far more than parsing a chat message.

Raw HTML is off, so any HTML in the agent's text arrives as text and gets escaped. Link
reference definitions are off: a line like ``[writer]: Done.`` is a definition to CommonMark
and renders to nothing, but in a chat it is text to show."""
PARSER.inline.ruler.at("autolink", _autolink_when_closed)

_RULE = "———"
URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


class TreeRenderer:
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
        text = PLAIN.inline(label)
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
        return prefix_lines(body, "> ")

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
            return self.table(aligned_table(node))
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
            return self.image(str(node.attrs.get("src", "")), PLAIN.inline(node))
        return self.escape(node.content)


class _PlainRenderer(TreeRenderer):
    """Readable text with the markup gone: the fallback when a platform rejects formatting."""


PLAIN = _PlainRenderer()


def escape_html(text: str, *, quote: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


def _slack_link(url: str, text: str) -> str:
    target = escape_html(url.replace("|", "%7C"))
    if not text or text == url or f"mailto:{text}" == url:
        return f"<{target}>"
    return f"<{target}|{escape_html(text)}>"


def prefix_lines(body: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in body.split("\n"))


def aligned_table(table: SyntaxTreeNode) -> str:
    """A Markdown table as monospace rows, since no chat platform renders tables."""
    rows: list[list[str]] = []
    for section in table.children:
        for row in section.children:
            cells = (
                PLAIN.inline(cell.children[0]) if cell.children else "" for cell in row.children
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
