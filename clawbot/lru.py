"""A mapping with a size limit that drops its least recently used entry.

For per-session caches: their keys grow with every session ever seen, while only recently
active sessions are worth keeping in memory (the store holds the rest and reloads them).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """At most ``max_size`` entries; reading or writing an entry makes it the most recent.
    Values are never None (``get`` answers None for a missing key)."""

    __slots__ = ("_items", "max_size")

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError("an LRU cache holds at least one entry")
        self.max_size = max_size
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` as the most recent entry, dropping the least recent if full."""
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self.max_size:
            self._items.popitem(last=False)

    def setdefault(self, key: K, value: V) -> V:
        """The entry for ``key``, storing ``value`` first when there is none."""
        current = self.get(key)
        if current is not None:
            return current
        self.put(key, value)
        return value

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)
