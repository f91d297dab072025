"""Logging through the standard ``logging`` module.

Every line carries the active agent's alias (``[main]``) or ``[system]`` outside a turn, so
``grep '\\[coder\\]'`` isolates one agent. A subagent's lines carry the chain of agents from
the root session down (``[main>researcher]``). Known secrets are replaced before a line is
written.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from clawbot.redaction import REDACTED, SecretRedactor, redactor

__all__ = ["REDACTED", "SecretRedactor", "agent_scope", "redactor", "setup_logging"]

current_agent: contextvars.ContextVar[str] = contextvars.ContextVar(
    "clawbot_agent", default="system"
)


class _AgentFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.agent = current_agent.get()
        return True


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redactor.redact(super().format(record))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of each record, so redirections
    made after set-up (test capture, terminal UIs) are honoured."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


@contextlib.contextmanager
def agent_scope(*agents: str) -> Iterator[None]:
    """Attribute every log line inside the block to an agent: ``agent_scope("coder")``, or
    to a subagent with the agents above it, root first: ``agent_scope("main", "coder")``
    reads ``[main>coder]``."""
    token = current_agent.set(">".join(agents))
    try:
        yield
    finally:
        current_agent.reset(token)


def setup_logging(level: str = "INFO", secrets: Iterable[str | None] = ()) -> None:
    """Log to stderr with the agent prefix and secret redaction; idempotent."""
    redactor.add_from_environment()
    redactor.add(*secrets)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_clawbot", False):
            root.removeHandler(handler)
    handler = _StderrHandler()
    handler._clawbot = True  # type: ignore[attr-defined]
    handler.addFilter(_AgentFilter())
    handler.setFormatter(
        RedactingFormatter("%(asctime)s [%(agent)s] %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("LiteLLM", "httpx", "httpcore", "aiosqlite", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
