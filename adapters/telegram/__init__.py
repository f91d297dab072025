"""The Telegram channel.

``adapter`` is the ``Adapter`` the ``clawbot.adapters`` entry point names; its parts:
``intake`` (polling and webhook that confirm only stored updates), ``buttons`` (approval
buttons and their edits).

Like every channel it imports only clawbot's foundation (``messages``, ``errors``,
``settings``) and ``clawbot.channels`` (the interface and rendering), never another platform.
"""

__all__ = [
    "adapter",
]
