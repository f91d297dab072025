"""The Discord channel.

``adapter`` is the ``Adapter`` the ``clawbot.adapters`` entry point names; its parts:
``gateway`` (intents, guarded parsers), ``inbound`` (messages into InboundMessages),
``sending`` (parts into ``send`` calls, the not-taken-in notice), ``catch_up`` (messages sent
while the bot was down), ``downloads`` (attachments), ``buttons``, ``setting_checks``.

Like every channel it imports only clawbot's foundation (``messages``, ``errors``,
``settings``) and ``clawbot.channels`` (the interface and rendering), never another platform.
"""

__all__ = [
    "adapter",
]
