"""The Discord channel.

``adapter`` is the ``Adapter`` the ``clawbot.adapters`` entry point names; its parts:
``catch_up`` (messages sent while the bot was down), ``downloads`` (attachments), ``buttons``.

Like every channel it imports only clawbot's foundation (``messages``, ``errors``,
``settings``) and ``clawbot.channels`` (the interface and rendering), never another platform.
"""

__all__ = [
    "adapter",
]
