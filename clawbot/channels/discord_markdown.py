"""Discord's markup: the agent's Markdown kept as written, but for what Discord can't show."""

from __future__ import annotations

import re

from markdown_it.tree import SyntaxTreeNode

from clawbot.channels.markdown_tree import TreeRenderer, aligned_table

_DISCORD_SPECIAL = re.compile(r"([\\*_~`])")
_BACKTICK_RUN = re.compile(r"`+")


def render_discord(source: str, tree: SyntaxTreeNode) -> str:
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
        aligned = aligned_table(block)
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


class _DiscordInlineRenderer(TreeRenderer):
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
