"""Slack's markup: ``mrkdwn``, with its own emphasis, links and escapes."""

from __future__ import annotations

from markdown_it.tree import SyntaxTreeNode

from clawbot.channels.markdown_tree import PLAIN, URL_SCHEME, TreeRenderer, escape_html


class SlackMrkdwnRenderer(TreeRenderer):
    """Slack ``mrkdwn``: its own emphasis syntax, ``<url|text>`` links, &amp;-style escapes."""

    def escape(self, text: str) -> str:
        return escape_html(text)

    def strong(self, inner: str) -> str:
        return f"*{inner}*"

    def emphasis(self, inner: str) -> str:
        return f"_{inner}_"

    def strikethrough(self, inner: str) -> str:
        return f"~{inner}~"

    def code_span(self, code: str) -> str:
        return f"`{escape_html(code)}`"

    def link(self, href: str, label: SyntaxTreeNode) -> str:
        text = PLAIN.inline(label)
        if not URL_SCHEME.match(href):
            return escape_html(super().link(href, label))
        return _slack_link(href, text)

    def image(self, src: str, alt: str) -> str:
        if not URL_SCHEME.match(src):
            return escape_html(super().image(src, alt))
        return _slack_link(src, alt)

    def heading(self, inner: str) -> str:
        return f"*{inner}*"

    def heading_inline(self, node: SyntaxTreeNode) -> str:
        return _SLACK_HEADING_INLINE.inline(node)

    def code_block(self, code: str, language: str) -> str:
        return f"```\n{escape_html(code)}\n```"

    def table(self, aligned: str) -> str:
        return f"```\n{escape_html(aligned)}\n```"


class _SlackHeadingInlineRenderer(SlackMrkdwnRenderer):
    def strong(self, inner: str) -> str:
        return inner


_SLACK_HEADING_INLINE = _SlackHeadingInlineRenderer()


def _slack_link(url: str, text: str) -> str:
    target = escape_html(url.replace("|", "%7C"))
    if not text or text == url or f"mailto:{text}" == url:
        return f"<{target}>"
    return f"<{target}|{escape_html(text)}>"
