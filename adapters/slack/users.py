"""People's names on Slack: message events carry only a user id, so names come from
``users.info`` (scope ``users:read``), cached in memory.

The cache is bounded (least recently used out) and entries expire, so renamed people show
their new name within ``ttl``. A lookup that fails — no scope, rate limited, Slack slow or
down — yields ``None`` and the caller shows the id: a name is never worth losing or delaying a
message for, so each lookup is capped at ``timeout`` seconds (well inside Slack's 3 s ack
window) and a failure is remembered for ``failure_ttl`` so a missing scope costs one call, not
one per message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger("adapters.slack")


class UserDirectory:
    """Display names by user id, looked up with ``users.info`` and cached."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        max_entries: int = 2048,
        ttl: float = 3600.0,
        failure_ttl: float = 300.0,
        timeout: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._max_entries = max_entries
        self._ttl, self._failure_ttl, self._timeout = ttl, failure_ttl, timeout
        self._clock = clock
        self._cache: OrderedDict[str, tuple[str | None, float]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[str | None]] = {}
        self._warned: set[str] = set()

    def __len__(self) -> int:
        return len(self._cache)

    async def name(self, user_id: str) -> str | None:
        """The person's display name (else real name, else handle); None if unknown."""
        cached = self._cache.get(user_id)
        if cached is not None and cached[1] > self._clock():
            self._cache.move_to_end(user_id)
            return cached[0]
        pending = self._pending.get(user_id)
        if pending is not None:  # one request per person, however many messages wait on it
            return await _shared(pending)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._pending[user_id] = future
        try:
            name, lifetime = await self._look_up(user_id)
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._pending[user_id]
        self._remember(user_id, name, lifetime)
        future.set_result(name)
        return name

    def remember(self, user_id: str, name: str) -> None:
        """A name learnt elsewhere (a profile in an event), kept like a looked-up one."""
        self._remember(user_id, name, self._ttl)

    def _remember(self, user_id: str, name: str | None, lifetime: float) -> None:
        self._cache[user_id] = (name, self._clock() + lifetime)
        self._cache.move_to_end(user_id)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)

    async def _look_up(self, user_id: str) -> tuple[str | None, float]:
        try:
            async with asyncio.timeout(self._timeout):
                response = await self._client.users_info(user=user_id)
        except SlackApiError as exc:
            data = exc.response.data if exc.response is not None else None
            error = str(data.get("error")) if isinstance(data, Mapping) else "unknown_error"
            self._warn(error, user_id)
            return None, self._failure_ttl
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._warn(type(exc).__name__, user_id)
            return None, self._failure_ttl
        return display_name(response.get("user")), self._ttl

    def _warn(self, reason: str, user_id: str) -> None:
        """Once per kind of failure: a missing scope would otherwise log on every message."""
        if reason in self._warned:
            return
        self._warned.add(reason)
        hint = " (add the users:read scope to the Slack app)" if reason == "missing_scope" else ""
        log.warning(
            "slack: cannot look up the name of %s (%s)%s; showing user ids instead",
            user_id,
            reason,
            hint,
        )


async def _shared(pending: asyncio.Future[str | None]) -> str | None:
    """Wait for another caller's lookup; if that caller was cancelled, this one gets None."""
    try:
        return await asyncio.shield(pending)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if pending.cancelled() and task is not None and not task.cancelling():
            return None
        raise


def display_name(user: Any) -> str | None:
    """What Slack shows for a person: display name, else real name, else the handle."""
    if not isinstance(user, Mapping):
        return None
    profile = user.get("profile")
    candidates: list[Any] = []
    if isinstance(profile, Mapping):
        candidates += [profile.get("display_name"), profile.get("real_name")]
    candidates += [user.get("real_name"), user.get("name")]
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None
