"""Scheduling: turns as persisted jobs in lanes, one active turn per session.

``scheduler`` is the facade (``Scheduler``) and ``records`` what it hands out; ``jobs`` (the
``TurnJob`` record) and ``backlog`` (what a session's next turn drains) sit below the store;
``turns`` runs one turn and ``recovery`` takes jobs over at start-up (both also used by
subagents' delegation); ``streaming`` is the turn plug-in that streams a turn's text to its
live reply (bound in ``clawbot.app``). The rest is private: ``queues``, ``session_state``,
``context``, ``delivery``, ``housekeeping``, ``outcomes``, ``hooks``.

It never imports ``subagents`` (it calls them back through ``hooks``), ``commands``,
``routing``, ``app``, ``cli`` or ``adapters``; ``jobs`` and ``backlog`` import only the
foundation.
"""

__all__ = [
    "backlog",
    "jobs",
    "records",
    "recovery",
    "scheduler",
    "streaming",
    "turns",
]
