"""HTML reduced to readable text for a model: the words of a page, one block a line.

Beautiful Soup (MIT, pure Python, long maintained) parses whatever the web serves, however
broken, with the standard library's parser. Scripts, styles and other things no one reads are
dropped; block elements start lines, headings keep a ``#`` mark and list items a ``-``, and
white space is collapsed, so the model spends its context on the text.

Beautiful Soup is imported at the first page, not at start: with soupsieve it costs about
0.1 s of CPU, which a start would add to the wait for its first reply.
"""

from __future__ import annotations

import re

UNREAD = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "head",
    "title",
)
BLOCKS = (
    "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "main", "nav",
    "ol", "p", "pre", "section", "summary", "table", "tr", "ul",
)  # fmt: skip
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BLANK_RUNS = re.compile(r"\n{3,}")


def html_to_text(markup: bytes | str, *, charset: str | None = None) -> str:
    """The readable text of an HTML document, its title first."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(markup, "html.parser", from_encoding=charset)
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(UNREAD):
        tag.decompose()
    for tag in soup.find_all("br"):
        tag.replace_with("\n")
    for tag in soup.find_all(BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    for tag in soup.find_all(HEADINGS):
        tag.insert_before("\n" + "#" * int(tag.name[1]) + " ")
        tag.insert_after("\n")
    for tag in soup.find_all("li"):
        tag.insert_before("\n- ")
    for tag in soup.find_all(("td", "th")):
        tag.insert_after(" ")
    lines = (" ".join(line.split()) for line in soup.get_text().splitlines())
    body = _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
    if title and not body.startswith(f"# {title}"):
        return f"# {title}\n\n{body}" if body else f"# {title}"
    return body
