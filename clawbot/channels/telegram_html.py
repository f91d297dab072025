"""Telegram's markup: the Bot API's ``parse_mode=HTML``, a handful of tags."""

from __future__ import annotations

import re

from markdown_it.tree import SyntaxTreeNode

from clawbot.channels.markdown_tree import URL_SCHEME, TreeRenderer, escape_html

_CODE_LANGUAGE = re.compile(r"[\w#+.-]+")


class TelegramHtmlRenderer(TreeRenderer):
    """Telegram Bot API ``parse_mode=HTML``: a handful of tags, everything else escaped."""

    def escape(self, text: str) -> str:
        return escape_html(text)

    def strong(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def emphasis(self, inner: str) -> str:
        return f"<i>{inner}</i>"

    def strikethrough(self, inner: str) -> str:
        return f"<s>{inner}</s>"

    def code_span(self, code: str) -> str:
        return f"<code>{escape_html(code)}</code>"

    def link(self, href: str, label: SyntaxTreeNode) -> str:
        inner = self.inline(label) or escape_html(href)
        if not URL_SCHEME.match(href):
            return escape_html(super().link(href, label)) if href else inner
        return f'<a href="{escape_html(href, quote=True)}">{inner}</a>'

    def image(self, src: str, alt: str) -> str:
        if not URL_SCHEME.match(src):
            return escape_html(super().image(src, alt))
        return f'<a href="{escape_html(src, quote=True)}">{escape_html(alt or src)}</a>'

    def heading(self, inner: str) -> str:
        return f"<b>{inner}</b>"

    def code_block(self, code: str, language: str) -> str:
        if _CODE_LANGUAGE.fullmatch(language):
            return f'<pre><code class="language-{language}">{escape_html(code)}</code></pre>'
        return f"<pre>{escape_html(code)}</pre>"

    def quote(self, body: str) -> str:
        return f"<blockquote>{body}</blockquote>"

    def table(self, aligned: str) -> str:
        return f"<pre>{escape_html(aligned)}</pre>"
