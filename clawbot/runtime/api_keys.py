"""Several API keys of one provider taking turns (``OPENAI_API_KEYS=a,b``).

A call goes out with the provider's current key; a 429 or a spent quota on it moves the
provider on to its next key, for this call at once and for the calls after it. A key is
named only as "openai key 2 of 3": its value is in no log line, error or repr (and the
redactor masks each listed key, should a provider's text echo one: ``listed_keys``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from clawbot.providers import listed_keys, provider_of


@dataclass(frozen=True)
class ApiKey:
    """One key of a provider's list, and where it stands in it."""

    value: str = field(repr=False)
    provider: str
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.provider} key {self.index + 1} of {self.count}"


class KeyRing:
    """A provider's keys, one of them current."""

    def __init__(self, provider: str, values: tuple[str, ...]) -> None:
        self.provider = provider
        self._keys = tuple(ApiKey(v, provider, i, len(values)) for i, v in enumerate(values))
        self._current = 0

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"KeyRing({self.provider!r}, {len(self._keys)} keys, current {self._current + 1})"

    def current(self) -> ApiKey:
        return self._keys[self._current]

    def refused(self, key: ApiKey) -> ApiKey:
        """``key`` met a 429 or a spent quota: the next key becomes current (unless a call
        that ran beside this one moved on already). Returns the current key."""
        if self._current == key.index:
            self._current = (key.index + 1) % len(self._keys)
        return self.current()


class ApiKeys:
    """The key rings of the providers that list keys, read from the environment at their
    first call (after the command line loaded ``.env``)."""

    def __init__(self, keys_of: Callable[[str], tuple[str, ...]] = listed_keys) -> None:
        self._keys_of = keys_of
        self._rings: dict[str, KeyRing | None] = {}

    def ring(self, model: str) -> KeyRing | None:
        """The ring of ``model``'s provider; None when it lists no keys (litellm then uses
        the provider's usual variable, ``OPENAI_API_KEY``)."""
        provider = provider_of(model)
        if provider not in self._rings:
            values = self._keys_of(provider)
            self._rings[provider] = KeyRing(provider, values) if values else None
        return self._rings[provider]
