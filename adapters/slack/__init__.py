"""The Slack channel.

``adapter`` is the ``Adapter`` the ``clawbot.adapters`` entry point names; its parts:
``users`` (names), ``commands`` (the slash command), ``interactions`` (slash commands
and button presses), ``buttons``.

Like every channel it imports only clawbot's foundation (``messages``, ``errors``,
``settings``) and ``clawbot.channels`` (the interface and rendering), never another platform.
"""

__all__ = [
    "adapter",
]
