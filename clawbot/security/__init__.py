"""Security: what a tool call may do, who said so, and what it did.

``risk`` (risk profiles), ``approval_records``, ``paused_rounds`` (the round a call waits
in), ``audit`` (audit records) and ``redaction`` (secrets masked) sit below the store;
``approvals`` asks a person (``approval_notices``: the messages that ask, and show the
answer) and keeps ``grants``; ``reach`` is the folders a session's file tools and shell may
touch; ``gate`` (``ToolGate``) is the runtime's one way to run a tool: approval first,
inside its audit record.

It never imports ``memory``, ``runtime``, ``scheduling``, ``commands``, ``routing``,
``app``, ``cli`` or ``adapters``; the records import only the foundation and each other
(``paused_rounds`` reaching ``runtime.llm``, and ``approvals`` and ``gate`` reaching
``subagents`` and ``tools``, are listed in tests/test_layout.py).
"""

__all__ = [
    "approval_records",
    "approvals",
    "audit",
    "gate",
    "paused_rounds",
    "reach",
    "redaction",
    "risk",
]
