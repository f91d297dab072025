"""Attachment downloads from Discord's CDN: plain HTTPS on a session of their own, apart from
the bot's REST and gateway connections, and without the bot token (the CDN needs none)."""

from __future__ import annotations

import aiohttp

from clawbot.errors import InputError
from clawbot.messages import Attachment

CHUNK_BYTES = 64 * 1024
DOWNLOAD_SECONDS = 120


class CdnDownloads:
    """Fetches attachments by the CDN URL their message carried; the HTTP session is opened
    on the first download and again after :meth:`close`."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        """Stream the download, so a lying size header cannot make us hold more than
        ``max_bytes``; every failure is an :class:`InputError` naming the attachment."""
        too_big = InputError(
            f"the attachment {attachment.name!r} is larger than the {max_bytes}-byte limit",
            hint="send a smaller file",
        )
        if attachment.size is not None and attachment.size > max_bytes:
            raise too_big
        if not attachment.ref.startswith(("https://", "http://")):
            raise InputError(f"the attachment {attachment.name!r} has no download URL")
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=DOWNLOAD_SECONDS)
            )
        try:
            async with self._session.get(attachment.ref) as response:
                if response.status != 200:
                    raise InputError(
                        f"could not download the attachment {attachment.name!r} "
                        f"(HTTP {response.status})"
                    )
                if response.content_length is not None and response.content_length > max_bytes:
                    raise too_big
                data = bytearray()
                async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                    data.extend(chunk)
                    if len(data) > max_bytes:
                        raise too_big
                return bytes(data)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise InputError(
                f"could not download the attachment {attachment.name!r} ({type(exc).__name__})"
            ) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
