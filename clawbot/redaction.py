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
from typing import NamedTuple

REDACTED = "[redacted]"

_SECRET_ENV_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MIN_SECRET_CHARS = 6
"""Shorter values are not registered: masking every "abc" in every text would do harm."""


class CredentialShape(NamedTuple):
    """A kind of credential, masked even when nobody told us the value: the pattern of its
    strings, and an anchor that is part of every string the pattern matches and begins
    with a fixed character.

    Text holding no anchor holds no credential, and the anchors are looked for first: that
    scan tries only the positions of a few characters, where the patterns try a dozen
    alternatives at every position (about 0.35 µs a character here: 18 µs for a message of
    50 characters, 300 µs for a reply of 900). A test checks each anchor against its
    pattern."""

    name: str
    pattern: str
    anchor: str


CREDENTIAL_SHAPES: tuple[CredentialShape, ...] = (
    CredentialShape(
        "OpenAI, Anthropic (sk-ant-...) and look-alikes",
        r"sk-[A-Za-z0-9_\-]{16,}",
        r"sk-[A-Za-z0-9_\-]{16}",
    ),
    CredentialShape(
        "Stripe",
        r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
        r"k_(?:live|test)_[A-Za-z0-9]{16}",
    ),
    CredentialShape(
        "Slack",
        r"xox[abposr]-[A-Za-z0-9\-]{10,}",
        r"xox[abposr]-[A-Za-z0-9\-]{10}",
    ),
    CredentialShape(
        "Slack app",
        r"xapp-[A-Za-z0-9\-]{10,}",
        r"xapp-[A-Za-z0-9\-]{10}",
    ),
    CredentialShape(
        "Telegram bot token",
        r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b",
        r":[A-Za-z0-9_\-]{30}",
    ),
    CredentialShape(
        "Discord bot token",
        r"\b[MNO][A-Za-z\d_\-]{23,27}\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27,40}\b",
        r"\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27}",
    ),
    CredentialShape(
        "GitHub token",
        r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
        r"gh[pousr]_[A-Za-z0-9]{36}",
    ),
    CredentialShape(
        "GitHub fine-grained token",
        r"\bgithub_pat_[A-Za-z0-9_]{22,}",
        r"github_pat_[A-Za-z0-9_]{22}",
    ),
    CredentialShape(
        "GitLab token",
        r"\bglpat-[A-Za-z0-9_\-]{20,}",
        r"glpat-[A-Za-z0-9_\-]{20}",
    ),
    CredentialShape(
        "AWS access key id",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        r"A(?:KIA|SIA)[0-9A-Z]{16}",
    ),
    CredentialShape(
        "Google API key",
        r"\bAIza[0-9A-Za-z_\-]{35}\b",
        r"AIza[0-9A-Za-z_\-]{35}",
    ),
    CredentialShape(
        "JWT",
        r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
        r"eyJ[A-Za-z0-9_\-]{10}",
    ),
    CredentialShape(
        "private key (to its end or the end of the text)",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
        r"PRIVATE KEY-----",
    ),
)
SECRET_SHAPES = re.compile("|".join(shape.pattern for shape in CREDENTIAL_SHAPES))
SECRET_ANCHORS = re.compile("|".join(shape.anchor for shape in CREDENTIAL_SHAPES))
"""Matches wherever :data:`SECRET_SHAPES` does (and in more places): a cheap first look."""


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
                # a list of keys (OPENAI_API_KEYS=a,b) is masked key by key too
                self.add(value, *(item.strip() for item in value.split(",")))

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced; the same object when there is none (the
        common case costs a substring search per registered value and one scan for the
        shapes' anchors)."""
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        if SECRET_ANCHORS.search(text) is None:
            return text
        return SECRET_SHAPES.sub(REDACTED, text)


redactor = SecretRedactor()
"""The process's redactor: log lines, transcript rows and outbound texts all pass it."""
