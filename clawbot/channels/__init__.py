"""Channels: how clawbot talks to a platform, and the one gate every reply passes.

``interface`` is the adapter interface a channel implements (``Adapter``, its limits, sent
messages, catch-up cursors): what ``adapters/`` and third-party channels import, beside the
foundation; ``harness`` is what a channel's test harness provides for the conformance
suite (``clawbot.testing.conformance``). ``outbox`` is the delivery gate (the only path to an
adapter's ``send`` and ``send_file``), through one ``pacer`` per chat (its platform's rate,
``retry_after``) and, for a reply shown while it is written, a ``live_reply``; ``memory`` is
the in-process channel of tests and benchmarks (``clawbot.testing``); ``file_kinds`` tells
from a file's first bytes how a chat should show it (a photo, a voice note, audio, a
document), ``rendering`` turns Markdown into each platform's markup (a file's caption too),
``chunking`` cuts replies to a platform's size (used by ``rendering``), ``markdown_tree`` is
the parse tree and the walk the markups share, and ``telegram_html``, ``slack_mrkdwn`` and
``discord_markdown`` are each platform's markup (used by ``rendering``).

Lowest of the stages: it imports only the foundation (``messages``, ``errors``,
``settings``, ``redaction``) and the records below the store (``routing.sessions``).
It never imports the store, another stage, ``app``, ``cli`` or ``adapters``.
"""

__all__ = [
    "file_kinds",
    "harness",
    "interface",
    "live_reply",
    "memory",
    "outbox",
    "pacer",
    "rendering",
]
