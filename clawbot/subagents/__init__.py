"""Subagents: child sessions an agent spawns, which report back to their parent.

What other packages use: ``records`` (below the store), ``tree`` (seeing the tree; a
child's key is ``clawbot.routing.sessions``' ``child_key``, a turn's place on its chain
``clawbot.security.origin``),
``ceiling``, ``context`` and ``scratchpad`` (what a turn reads of them), and the tools:
``control`` and ``session_tools`` (``sessions_*``), ``delegate_tools``, ``messaging``. ``spawning``,
``injection``, ``announce``, ``delegation``, ``peers``, ``coordinator`` and
``notifications`` are private.

It never imports ``commands``, ``routing`` (beyond the ``Session`` record and its keys),
``app``, ``cli`` or ``adapters``.
"""

__all__ = [
    "ceiling",
    "context",
    "control",
    "delegate_tools",
    "messaging",
    "records",
    "scratchpad",
    "session_tools",
    "tree",
]
