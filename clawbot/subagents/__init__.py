"""Subagents: child sessions an agent spawns, which report back to their parent.

What other packages use: ``records`` (below the store), ``keys`` and ``origin``
(naming the tree; ``clawbot.agents.chains`` walks it), ``tree`` (seeing it),
``ceiling``, ``context`` and ``scratchpad`` (what a turn reads of them), and the tools:
``control`` and ``session_tools`` (``sessions_*``), ``delegate_tools``, ``messaging``. ``spawning``,
``injection``, ``announce``, ``delegation``, ``peers``, ``coordinator`` and
``notifications`` are private.

It never imports ``commands``, ``routing``, ``app``, ``cli`` or ``adapters``.
"""

__all__ = [
    "ceiling",
    "context",
    "control",
    "delegate_tools",
    "keys",
    "messaging",
    "origin",
    "records",
    "scratchpad",
    "session_tools",
    "tree",
]
