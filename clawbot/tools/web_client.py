"""What the web tools (``web_fetch``, ``web_search``) share of HTTP: a client session that
takes no proxy from the environment, a body read up to a cap, and an exchange bounded in time
whose slowness or failure becomes a ToolError the model reads, never a hung turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import aiohttp

from clawbot.errors import ToolError

READ_CHUNK = 64 * 1024


def web_session(
    *, headers: Mapping[str, str], connector: aiohttp.BaseConnector | None = None
) -> aiohttp.ClientSession:
    """A client session for one tool call. No proxy from the environment: the tool goes
    where its settings say, and the address checks see the real destination."""
    return aiohttp.ClientSession(connector=connector, trust_env=False, headers=dict(headers))


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether there was more (left unread)."""
    body = bytearray()
    async for chunk in response.content.iter_chunked(READ_CHUNK):
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


@asynccontextmanager
async def answered_within(
    what: str, timeout: float, *, failed: str = "could not be reached"
) -> AsyncIterator[None]:
    """Bound the exchange with ``what`` to ``timeout`` seconds; a timeout or a connection
    failure inside becomes a ToolError naming ``what`` (never its credentials)."""
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError:
        raise ToolError(
            f"{what} did not answer within {timeout:g} s", hint="try again later"
        ) from None
    except aiohttp.ClientError as exc:
        raise ToolError(f"{what} {failed}: {failure_reason(exc)}") from None


def failure_reason(exc: aiohttp.ClientError) -> str:
    """A connection failure in a few words (an exception's text can hold a whole URL)."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"no connection ({exc.os_error.strerror or type(exc.os_error).__name__})"
    return type(exc).__name__
