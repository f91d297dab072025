"""Slack files: ``files.info`` for the download URL, then the download with the bot token,
which only Slack's own hosts ever see, refused past ``max_bytes`` before and while reading."""

from __future__ import annotations

from urllib.parse import urlsplit

import aiohttp
from pydantic import SecretStr
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.sending import error_code
from clawbot.errors import InputError
from clawbot.messages import Attachment


class SlackFiles:
    """Fetches Slack files with the bot token; the HTTP session for the downloads is opened on
    the first one and again after :meth:`close`."""

    def __init__(self, client: AsyncWebClient, bot_token: SecretStr, api_base: str) -> None:
        self._client = client
        self._bot_token = bot_token
        self._api_base = api_base
        self._files: aiohttp.ClientSession | None = None

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        """Download a file via ``files.info`` + ``url_private_download`` (bot token needed),
        refusing anything over ``max_bytes`` before and while reading."""
        if attachment.size is not None and attachment.size > max_bytes:
            raise _too_large(attachment, max_bytes)
        try:
            info = await self._client.files_info(file=attachment.ref)
        except SlackApiError as exc:
            raise InputError(
                f"cannot fetch the Slack file {attachment.name!r} ({error_code(exc)})"
            ) from None
        file = info.get("file") or {}
        size = file.get("size")
        if isinstance(size, int) and size > max_bytes:
            raise _too_large(attachment, max_bytes)
        url = file.get("url_private_download") or file.get("url_private")
        if not isinstance(url, str) or not self._is_slack_url(url):
            raise InputError(f"the Slack file {attachment.name!r} has no downloadable URL")
        if self._files is None or self._files.closed:
            self._files = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        headers = {"Authorization": f"Bearer {self._bot_token.get_secret_value()}"}
        try:
            async with self._files.get(url, headers=headers) as response:
                if response.status != 200 or (
                    response.content_type == "text/html" and "html" not in attachment.mime_type
                ):
                    raise InputError(
                        f"Slack did not hand out the file {attachment.name!r} "
                        f"(HTTP {response.status})",
                        hint="the bot token needs the files:read scope",
                    )
                data = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    data += chunk
                    if len(data) > max_bytes:
                        raise _too_large(attachment, max_bytes)
                return bytes(data)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise InputError(
                f"cannot download the Slack file {attachment.name!r} ({type(exc).__name__})"
            ) from None

    def _is_slack_url(self, url: str) -> bool:
        """Only Slack's own hosts (or the configured API host) ever see the bot token."""
        host = (urlsplit(url).hostname or "").lower()
        return host == (urlsplit(self._api_base).hostname or "").lower() or (
            host == "slack.com" or host.endswith((".slack.com", ".slack-edge.com"))
        )

    async def close(self) -> None:
        files, self._files = self._files, None
        if files is not None:
            await files.close()


def _too_large(attachment: Attachment, max_bytes: int) -> InputError:
    return InputError(
        f"the file {attachment.name!r} is larger than the {max_bytes}-byte limit",
        hint="send a smaller file or raise CLAWBOT_ATTACHMENT_MAX_BYTES",
    )
