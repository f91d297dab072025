"""Secrets out of every text clawbot writes: log lines, transcripts and platform sends.

Two kinds of secret are replaced by ``[redacted]``: the values clawbot knows (its own
tokens and keys from settings, and environment variables named like ``*_KEY``,
``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``), and strings shaped like well-known credentials
(provider API keys, chat-platform tokens, cloud keys, JWTs, private-key blocks) even when
nobody told us the value: a model that echoes a key a user pasted, or a tool output that
holds one, must not carry it onward to a chat or into the database.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

REDACTED = "[redacted]"

_SECRET_ENV_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MIN_SECRET_CHARS = 6
"""Shorter values are not registered: masking every "abc" in every text would do harm."""

# Shapes of common credentials, redacted even when we were never told the value.
SECRET_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic (sk-ant-...) and look-alikes
    r"|\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}"  # Slack
    r"|\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b"  # Telegram bot tokens
    r"|\b[MNO][A-Za-z\d_\-]{23,27}\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27,40}\b"  # Discord
    r"|\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|\bglpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bAIza[0-9A-Za-z_\-]{35}\b"  # Google API keys
    r"|\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # JWTs
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
)


class SecretRedactor:
    """Replaces registered secret values and credential-shaped strings with a marker."""

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, *values: str | None) -> None:
        for value in values:
            if value and len(value) >= MIN_SECRET_CHARS:
                self._values.add(value)
                # The same value inside JSON text (a stored transcript row) is escaped.
                escaped = json.dumps(value)[1:-1]
                if escaped != value:
                    self._values.add(escaped)

    def add_from_environment(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        for name, value in env.items():
            if any(hint in name.upper() for hint in _SECRET_ENV_HINTS):
                self.add(value)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced; the same object when there is none (the
        common case costs one regex search)."""
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        if SECRET_SHAPES.search(text) is None:
            return text
        return SECRET_SHAPES.sub(REDACTED, text)


redactor = SecretRedactor()
"""The process's redactor: log lines, transcript rows and outbound texts all pass it."""
