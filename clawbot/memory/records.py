"""The records of memories and their checks: keys, tags, namespaces, references.

Namespaces keep keys apart: an agent writes into the namespace named by its own agent id, so
``main``'s ``colour`` and ``worker``'s ``colour`` are two memories, shown as ``main:colour``
and ``worker:colour``. An agent reads its own namespace plus the ones its context policy
lists in ``recall_from`` (``*``: every namespace). Keys never hold a ``:``, so a reference
``namespace:key`` is never ambiguous. Every write records the session and agent that made
it, and searches rank memories of the asking session and agent first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from clawbot.agents.profiles import AgentSpec
from clawbot.errors import MemoryInputError

KEY_PATTERN = re.compile(r"^[\w][\w.\-/ ]{0,119}$")
TAG_PATTERN = re.compile(r"^[\w][\w\-]{0,39}$")
MAX_TAGS = 12
ALL_NAMESPACES = "*"
"""In ``recall_from``: every namespace."""


@dataclass(frozen=True)
class Memory:
    """One stored memory, as the store hands it out."""

    namespace: str
    key: str
    text: str
    tags: tuple[str, ...]
    session_key: str
    agent_id: str
    created_at: datetime
    updated_at: datetime

    @property
    def ref(self) -> str:
        """``namespace:key``: how tools, ``/memory`` and the CLI name it."""
        return f"{self.namespace}:{self.key}"


@dataclass(frozen=True)
class MemoryHit:
    """A memory a search found, with its rank (higher is more relevant)."""

    memory: Memory
    score: float


@dataclass(frozen=True)
class MemoryQuery:
    """A search: its words, where to look, and who asks (their memories rank first).
    ``namespaces`` None looks everywhere; ``tags`` keeps memories with any of them."""

    text: str
    session_key: str
    agent_id: str
    namespaces: tuple[str, ...] | None
    limit: int = 5
    tags: tuple[str, ...] = ()


def check_key(key: str) -> str:
    """The key, trimmed; a clear error for one that cannot be a key."""
    key = key.strip()
    if not key:
        raise MemoryInputError("the memory key is empty", hint="give a short name, e.g. 'colour'")
    if not KEY_PATTERN.match(key):
        raise MemoryInputError(
            f"the memory key {key[:60]!r} is not valid",
            hint="use up to 120 letters, digits, spaces or . - _ / (no ':'), starting with a"
            " letter or digit",
        )
    return key


def check_text(text: str, limit: int) -> str:
    """The text; a clear error when it is empty or longer than ``limit`` characters."""
    if not text.strip():
        raise MemoryInputError("the memory text is empty", hint="say what to remember")
    if len(text) > limit:
        raise MemoryInputError(
            f"the memory is {len(text):,} characters, over the limit of {limit:,}",
            hint="store a shorter summary, or split it under several keys"
            " (the limit is the setting CLAWBOT_MEMORY_MAX_CHARS)",
        )
    return text


def check_tags(tags: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Tags lower-cased, without repeats, in order; a clear error for an invalid one."""
    found: list[str] = []
    for tag in tags:
        tag = tag.strip().lower()
        if not TAG_PATTERN.match(tag):
            raise MemoryInputError(
                f"the tag {tag[:40]!r} is not valid",
                hint="use up to 40 letters, digits, '-' or '_' per tag",
            )
        if tag not in found:
            found.append(tag)
    if len(found) > MAX_TAGS:
        raise MemoryInputError(f"{len(found)} tags is too many", hint=f"use at most {MAX_TAGS}")
    return tuple(found)


def split_ref(ref: str, default_namespace: str) -> tuple[str, str]:
    """``namespace:key`` -> (namespace, key); a bare key is in ``default_namespace``."""
    namespace, sep, key = ref.strip().partition(":")
    if not sep:
        return default_namespace, check_key(namespace)
    if not namespace.strip():
        raise MemoryInputError(f"{ref[:60]!r} names no namespace", hint="write namespace:key")
    return namespace.strip(), check_key(key)


def readable_namespaces(agent: AgentSpec) -> tuple[str, ...] | None:
    """The namespaces ``agent`` recalls from: its own, then ``recall_from``; None for all."""
    listed = agent.context.recall_from
    if ALL_NAMESPACES in listed:
        return None
    return tuple(dict.fromkeys((agent.agent_id, *listed)))
