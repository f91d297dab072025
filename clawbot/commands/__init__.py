"""Slash commands, answered by the router without a model call, one module per family.

``registry`` holds the registry and the command context (``parse_command`` is in
``clawbot.messages``: adapters use it too); ``builtin``
/start, /help, /new and /status; then ``agents`` (/agents, /agent, /models, /model,
/skills, /context), ``approvals`` (/approve, /deny, /grants), ``compaction`` (/compact),
``memory`` (/memory), ``queue`` (/queue, /stop), ``subagents`` (/subagents), ``usage``
(/usage) and ``voice`` (/voice). Commands
see narrow protocols (``SessionControl``, ``QueueControl``, ``SubagentControl``), never the
router.

It never imports ``routing``, ``app``, ``cli`` or ``adapters``.
"""

__all__ = [
    "agents",
    "approvals",
    "builtin",
    "compaction",
    "memory",
    "queue",
    "registry",
    "schedules",
    "subagents",
    "usage",
    "voice",
]
