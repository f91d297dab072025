"""The Telegram channel.

``adapter`` is the ``Adapter`` the ``clawbot.adapters`` entry point names; its parts:
``intake`` (polling and webhook that confirm only stored updates), ``inbound`` (updates into
InboundMessages: senders, mentions, attachments), ``sending`` (rendered parts into
``sendMessage`` calls, plain-text fallback, rate limits), ``buttons`` (approval buttons and
their edits), ``setting_checks`` (the settings' problems, and a failed start's), ``redaction``
(the token kept out of the logs).

Like every channel it imports only clawbot's foundation (``messages``, ``errors``,
``settings``) and ``clawbot.channels`` (the interface and rendering), never another platform.
"""

__all__ = [
    "adapter",
]
