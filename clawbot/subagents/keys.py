"""A child session's key and id, defined here once: ``internal:<parent key>/<child id>``.

The key names its parent, so a grandchild's key holds the whole chain; the child id (the
part after the parent's key) is what a person types in ``/subagents stop <id>``.
"""

from __future__ import annotations

from clawbot.messages import INTERNAL_CHANNEL

_PREFIX = f"{INTERNAL_CHANNEL}:"


def child_key(parent_key: str, child_id: str) -> str:
    """The key of ``parent_key``'s child ``child_id`` (which holds no ``/``)."""
    if not child_id or "/" in child_id:
        raise ValueError(f"a child id is not empty and holds no '/': {child_id!r}")
    return f"{_PREFIX}{parent_key}/{child_id}"


def child_id_of(key: str) -> str | None:
    """The child id in a child session's key; None for a key that is not a child's."""
    parent, child = _split(key)
    return child if parent else None


def parent_key_of(key: str) -> str | None:
    """The parent's key in a child session's key; None for a key that is not a child's."""
    parent, _ = _split(key)
    return parent or None


def _split(key: str) -> tuple[str, str]:
    if not key.startswith(_PREFIX):
        return "", ""
    parent, slash, child = key[len(_PREFIX) :].rpartition("/")
    return (parent, child) if slash and parent and child else ("", "")
