"""Security: what a tool call may do, who said so, and what it did.

``risk`` (each agent's risk profile; the profiles themselves are ``clawbot.policies``),
``approval_records``, ``paused_rounds`` (the round a call waits in) and ``audit`` (audit
records) sit below the store; ``approvals`` asks a person (``approval_notices``: the
messages that ask, and show the answer) and keeps ``grants``; ``reach`` is the folders a
session's file tools and shell may touch; ``origin`` is where a turn stands on its chain
of agents (the trace its calls are filed under); ``gate`` (``ToolGate``) is the runtime's
one way to run a tool: approval first, inside its audit record. Secrets are masked by
``clawbot.redaction``, in the foundation.

It never imports ``tools``, ``memory``, ``runtime``, ``scheduling``, ``subagents``,
``commands``, ``routing`` (beyond the records below the store: ``runtime.replies``,
``subagents.records``, ``routing.sessions``), ``app``, ``cli`` or ``adapters``; the records
import only the foundation and each other.
"""

__all__ = [
    "approval_records",
    "approvals",
    "audit",
    "gate",
    "origin",
    "paused_rounds",
    "reach",
    "risk",
]
