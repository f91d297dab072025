"""The Slack channel.

``adapter`` is the ``Adapter`` the ``clawbot.adapters`` entry point names; its parts:
``connections`` (Socket Mode or the HTTP Events API into bolt's app), ``inbound`` (events
into InboundMessages), ``sending`` (parts into ``chat.postMessage`` calls), ``users``
(names), ``commands`` (the slash command), ``interactions`` (slash commands and button
presses), ``buttons``, ``downloads`` (files), ``setting_checks``.

Like every channel it imports only clawbot's foundation (``messages``, ``errors``,
``settings``) and ``clawbot.channels`` (the interface and rendering), never another platform.
"""

__all__ = [
    "adapter",
]
