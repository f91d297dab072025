"""render / render_parts: agent Markdown becomes each platform's markup, safely and in size."""

from __future__ import annotations

import random
import re

import pytest

from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import MARKUPS, Markup, RenderedPart, render, render_parts

TELEGRAM_TAG = re.compile(r"</?([a-z-]+)(?: [^>]*)?>")
TELEGRAM_ALLOWED_TAGS = {"b", "i", "u", "s", "code", "pre", "a", "blockquote", "tg-spoiler"}


# Telegram HTML


def test_telegram_escapes_angle_brackets_and_ampersand_in_text() -> None:
    assert render("a < b && c > d", "telegram_html") == "a &lt; b &amp;&amp; c &gt; d"


def test_telegram_leaves_quotes_in_text_alone() -> None:
    assert render('say "hi" it\'s', "telegram_html") == 'say "hi" it\'s'


def test_telegram_escapes_inline_code() -> None:
    assert render("`if a<b && c>d`", "telegram_html") == "<code>if a&lt;b &amp;&amp; c&gt;d</code>"


def test_telegram_code_block_keeps_language_and_escapes_content() -> None:
    rendered = render("```python\nif x < 1 & y:\n    pass\n```", "telegram_html")
    assert rendered == (
        '<pre><code class="language-python">if x &lt; 1 &amp; y:\n    pass</code></pre>'
    )


def test_telegram_code_block_without_language_is_bare_pre() -> None:
    assert render("```\nx = 1\n```", "telegram_html") == "<pre>x = 1</pre>"


def test_telegram_code_block_language_cannot_inject_attributes() -> None:
    assert render('```py" onclick="x\ncode\n```', "telegram_html") == "<pre>code</pre>"


def test_telegram_link_escapes_quotes_and_ampersand_in_href() -> None:
    rendered = render('[search](<https://e.com/?q="a b"&lang=en>)', "telegram_html")
    assert rendered == '<a href="https://e.com/?q=%22a%20b%22&amp;lang=en">search</a>'


def test_telegram_link_label_is_escaped() -> None:
    rendered = render("[a<b & c](https://e.com)", "telegram_html")
    assert rendered == '<a href="https://e.com">a&lt;b &amp; c</a>'


def test_telegram_link_without_label_shows_its_url() -> None:
    assert render("[](https://e.com)", "telegram_html") == (
        '<a href="https://e.com">https://e.com</a>'
    )


def test_telegram_relative_link_is_text_not_a_rejected_href() -> None:
    assert render("[docs](docs/a.md)", "telegram_html") == "docs (docs/a.md)"


def test_telegram_nested_bold_and_italic() -> None:
    assert render("**bold _both_ bold**", "telegram_html") == "<b>bold <i>both</i> bold</b>"
    assert render("*it **both***", "telegram_html") == "<i>it <b>both</b></i>"


def test_telegram_strikethrough() -> None:
    assert render("~~gone~~", "telegram_html") == "<s>gone</s>"


def test_telegram_heading_becomes_bold() -> None:
    assert render("## Results & notes", "telegram_html") == "<b>Results &amp; notes</b>"


def test_telegram_lists_become_bullet_and_numbered_lines() -> None:
    rendered = render("- one\n- two\n\n3. three\n4. four", "telegram_html")
    assert rendered == "• one\n• two\n\n3. three\n4. four"


def test_telegram_nested_list_is_indented() -> None:
    assert render("- outer\n  - inner", "telegram_html") == "• outer\n  • inner"


def test_telegram_blockquote() -> None:
    assert render("> quoted\n> text", "telegram_html") == "<blockquote>quoted\ntext</blockquote>"


def test_telegram_image_becomes_link() -> None:
    rendered = render("![a chart](https://e.com/c.png)", "telegram_html")
    assert rendered == '<a href="https://e.com/c.png">a chart</a>'


def test_telegram_raw_html_in_source_is_escaped_as_text() -> None:
    rendered = render('<script>alert("x")</script> <b>not bold</b>', "telegram_html")
    assert "<script>" not in rendered and "<b>" not in rendered
    assert "&lt;b&gt;not bold&lt;/b&gt;" in rendered


def test_telegram_table_is_escaped_preformatted_text() -> None:
    rendered = render("| a | b<c |\n|---|---|\n| 1 | 2 |", "telegram_html")
    assert rendered == "<pre>a | b&lt;c\n--+----\n1 | 2</pre>"


def test_telegram_empty_blocks_render_to_nothing() -> None:
    assert render(">\n\n```\n```\n\n#", "telegram_html") == ""


def test_telegram_output_uses_only_allowed_tags() -> None:
    source = (
        "# Title\n\n**b** _i_ ~~s~~ `c` [l](https://x.y) ![p](https://x.y/p.png)\n\n"
        "> q\n\n- a\n1. b\n\n```go\nfmt.Println()\n```\n\n| t |\n|---|\n| v |\n\n---\n\n"
        "<div>html</div>"
    )
    tags = set(TELEGRAM_TAG.findall(render(source, "telegram_html")))
    assert tags <= TELEGRAM_ALLOWED_TAGS


# Slack mrkdwn


def test_slack_link_uses_angle_bracket_pipe_syntax() -> None:
    assert render("[the docs](https://e.com/a)", "slack_mrkdwn") == "<https://e.com/a|the docs>"


def test_slack_link_escapes_ampersand_and_pipe_in_url() -> None:
    rendered = render("[x](https://e.com/?a=1&b=2|3)", "slack_mrkdwn")
    assert rendered == "<https://e.com/?a=1&amp;b=2%7C3|x>"


def test_slack_autolink_has_no_label() -> None:
    assert render("<https://e.com>", "slack_mrkdwn") == "<https://e.com>"


def test_slack_escapes_control_characters_in_text() -> None:
    assert render("1 < 2 & 3 > 2", "slack_mrkdwn") == "1 &lt; 2 &amp; 3 &gt; 2"


def test_slack_emphasis_syntax() -> None:
    assert render("**bold** _it_ ~~del~~ `x<y`", "slack_mrkdwn") == "*bold* _it_ ~del~ `x&lt;y`"


def test_slack_code_block_is_triple_backticks_with_escaping() -> None:
    assert render("```js\na && b\n```", "slack_mrkdwn") == "```\na &amp;&amp; b\n```"


def test_slack_quote_and_bullets() -> None:
    assert render("> a\n> b\n\n- c", "slack_mrkdwn") == "> a\n> b\n\n• c"


def test_slack_heading_is_bold_without_nested_bold() -> None:
    assert render("### The **key** point", "slack_mrkdwn") == "*The key point*"


# Discord Markdown


def test_discord_keeps_headings_it_supports() -> None:
    assert render("# One\n\n### Three", "discord_markdown") == "# One\n\n### Three"


def test_discord_deep_heading_becomes_bold() -> None:
    assert render("#### Four\n\n###### Six", "discord_markdown") == "**Four**\n\n**Six**"


def test_discord_deep_heading_with_bold_inside_does_not_double_bold() -> None:
    assert render("#### A **key** idea", "discord_markdown") == "**A key idea**"


def test_discord_setext_heading_becomes_hash_heading() -> None:
    assert render("Title\n=====\n\nSub\n---", "discord_markdown") == "# Title\n\n## Sub"


def test_discord_table_is_kept_inside_a_code_block() -> None:
    rendered = render("| name | n |\n|---|---|\n| a | 1 |", "discord_markdown")
    assert rendered == "```\nname | n\n-----+--\na    | 1\n```"


def test_discord_image_becomes_link() -> None:
    assert render("See ![plot](https://e.com/p.png)", "discord_markdown") == (
        "See [plot](https://e.com/p.png)"
    )


def test_discord_keeps_its_own_syntax_as_written() -> None:
    source = "__underline__ ||spoiler|| **bold** *it* `code`\n\n```py\nx = 1\n```\n\n- item"
    assert render(source, "discord_markdown") == source


# Plain


def test_plain_strips_markup() -> None:
    source = "# Title\n\n**bold** _it_ ~~s~~ `code` [link](https://e.com)\n\n> quote\n\n- item"
    assert render(source, "plain") == (
        "Title\n\nbold it s code link (https://e.com)\n\n> quote\n\n• item"
    )


def test_plain_keeps_code_block_content_without_fences() -> None:
    assert render("```python\nprint('hi')\n```", "plain") == "print('hi')"


def test_plain_does_not_escape_characters() -> None:
    assert render("a < b & c", "plain") == "a < b & c"


def test_plain_autolink_is_just_the_url() -> None:
    assert render("<https://e.com>", "plain") == "https://e.com"


# render_parts


@pytest.mark.parametrize("markup", MARKUPS)
def test_render_parts_of_empty_input_is_empty(markup: Markup) -> None:
    assert render_parts("  \n\n ", ChannelLimits(100, markup)) == []


@pytest.mark.parametrize("markup", MARKUPS)
@pytest.mark.parametrize("text", ["```\n```", "#", "##  "])
def test_render_parts_sends_a_text_that_renders_empty_as_written(markup: Markup, text: str) -> None:
    # an empty fence, a lone heading mark: Markdown renders them to nothing, and a reply
    # must not vanish
    assert render_parts(text, ChannelLimits(4096, markup)) == [
        RenderedPart(text=text.strip(), plain=text.strip(), markup="plain")
    ]


@pytest.mark.parametrize("markup", MARKUPS)
@pytest.mark.parametrize("text", ["[writer]: Done.", "[researcher]: https://example.com/paper"])
def test_a_text_shaped_like_a_link_definition_is_shown_as_written(
    markup: Markup, text: str
) -> None:
    (part,) = render_parts(text, ChannelLimits(4096, markup))

    assert (part.text, part.plain) == (text, text)


def test_render_parts_sends_only_the_chunk_that_renders_empty_as_written() -> None:
    parts = render_parts("**Done.**\n\n```\n```", ChannelLimits(16, "telegram_html"))

    assert parts == [
        RenderedPart(text="<b>Done.</b>", plain="Done.", markup="telegram_html"),
        RenderedPart(text="```\n```", plain="```\n```", markup="plain"),
    ]


def test_render_parts_short_message_is_one_part_with_plain_fallback() -> None:
    parts = render_parts("**hi** <there>", ChannelLimits(4096, "telegram_html"))
    assert parts == [
        RenderedPart(text="<b>hi</b> &lt;there&gt;", plain="hi <there>", markup="telegram_html")
    ]


def test_render_parts_rejects_unknown_markup() -> None:
    with pytest.raises(ValueError, match="unknown markup"):
        render_parts("hi", ChannelLimits(100, "bbcode"))


@pytest.mark.parametrize(
    ("markup", "limit", "text"),
    [
        ("telegram_html", 4096, "<" * 5000),
        ("telegram_html", 4096, "```\n" + "&" * 5000 + "\n```"),
        ("slack_mrkdwn", 4000, "<>&" * 2000),
        ("discord_markdown", 2000, "*" * 5000),
        ("plain", 2000, "<" * 5000),
    ],
)
def test_render_parts_respects_limit_with_heavily_escaped_text(
    markup: Markup, limit: int, text: str
) -> None:
    parts = render_parts(text, ChannelLimits(limit, markup))
    assert parts
    for part in parts:
        assert 0 < len(part.text) <= limit
        assert 0 < len(part.plain) <= limit
        assert part.markup == markup


def test_render_parts_keeps_every_escaped_character() -> None:
    parts = render_parts("<" * 5000, ChannelLimits(4096, "telegram_html"))
    assert sum(part.text.count("&lt;") for part in parts) == 5000


def test_render_parts_reopens_code_language_in_every_telegram_part() -> None:
    code = "\n".join(f"print({i} < {i + 1})" for i in range(400))
    parts = render_parts(f"```python\n{code}\n```", ChannelLimits(2000, "telegram_html"))
    assert len(parts) > 1
    for part in parts:
        assert part.text.startswith('<pre><code class="language-python">')
        assert part.text.endswith("</code></pre>")


@pytest.mark.parametrize("markup", MARKUPS)
def test_render_parts_of_random_replies_fit_and_are_never_empty(markup: Markup) -> None:
    rng = random.Random(7)
    pieces = ["word", "<tag>", "a & b", "**bold**", "_it_", "`x<y`", "[l](https://e.com/?a&b)"]
    for _ in range(30):
        paragraphs = [
            " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 120)))
            for _ in range(rng.randint(1, 8))
        ]
        if rng.random() < 0.3:
            paragraphs.append("```sh\n" + "echo '<&>'\n" * rng.randint(1, 120) + "```")
        limit = rng.choice([200, 500, 2000])
        for part in render_parts("\n\n".join(paragraphs), ChannelLimits(limit, markup)):
            assert part.text.strip() and part.plain.strip()
            assert len(part.text) <= limit and len(part.plain) <= limit


@pytest.mark.parametrize("markup", MARKUPS)
def test_each_parts_source_sent_alone_renders_to_that_part_again(markup: Markup) -> None:
    # how the chat's pacer sends a long reply, and a live reply edits its messages, a part
    # a call: each part's Markdown renders to exactly that part
    rng = random.Random(11)
    pieces = ["word", "<tag>", "a & b", "**bold**", "_it_", "`x<y`", "> quote\n", "\n- item", "😀"]
    limits = ChannelLimits(
        300, markup, length_unit="utf16" if markup == "telegram_html" else "chars"
    )
    for _ in range(20):
        text = "\n\n".join(
            " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 80))) for _ in range(4)
        )
        for part in render_parts(text, limits):
            assert render_parts(part.source, limits) == [part]


def test_discord_long_reply_fills_its_first_message_before_cutting_a_long_paragraph() -> None:
    from adapters.discord.adapter import DiscordAdapter

    part_two = " ".join(f"Sentence {n} of part two goes on a while." for n in range(60))
    parts = render_parts(f"Part one.\n\n{part_two}", DiscordAdapter.limits)
    assert parts[0].text.startswith("Part one.\n\nSentence 0 of part two")
    assert 1950 < len(parts[0].text) <= 2000
    assert parts[0].text.endswith(".")
    assert "".join(p.text for p in parts).count("Sentence") == 60


@pytest.mark.parametrize(
    "limits",
    [
        ChannelLimits(4096, "telegram_html", length_unit="utf16"),
        ChannelLimits(4000, "slack_mrkdwn"),
        ChannelLimits(2000, "discord_markdown"),
    ],
)
def test_every_platform_packs_a_short_paragraph_with_the_start_of_a_long_list(
    limits: ChannelLimits,
) -> None:
    items = "\n".join(f"- item {n} with a few words 🙂" for n in range(300))
    parts = render_parts(f"Part one.\n\n{items}", limits)
    assert parts[0].plain.startswith("Part one.\n\n• item 0 ")
    assert len(parts[0].plain) > limits.max_message_chars * 0.9


@pytest.mark.parametrize("markup", ["telegram_html", "slack_mrkdwn", "discord_markdown"])
def test_a_line_shaped_like_a_link_definition_keeps_its_place_among_other_lines(
    markup: Markup,
) -> None:
    """``[writer]: Done.`` is a link reference definition to CommonMark, which renders to
    nothing; in a chat it is what the writer said, and the lines after it follow."""
    text = "[writer]: Done.\nThe draft is in drafts/post.md.\n\n[ref]: https://example.com"

    (part,) = render_parts(text, ChannelLimits(4096, markup))

    assert part.text.startswith("[writer]: Done.\nThe draft is in drafts/post.md.")
    assert "[ref]: https://example.com" in part.text
