"""Downloads of what people sent, through the channel that brought it (the adapter the
outbox holds, with the bot's own credentials), under a size cap and a time limit. Every
failure is an InputError that says what happened and, for a cap, which setting sets it."""

from __future__ import annotations

import asyncio
import logging

from clawbot.channels.outbox import Outbox
from clawbot.errors import ClawbotError, InputError
from clawbot.messages import AttachmentBlock, human_size

log = logging.getLogger("clawbot.media")


class Fetcher:
    def __init__(self, outbox: Outbox, timeout: float) -> None:
        self.outbox = outbox
        self.timeout = timeout

    async def fetch(self, block: AttachmentBlock, max_bytes: int, setting: str) -> bytes:
        """The file's bytes, at most ``max_bytes`` (the limit ``setting`` sets)."""
        if block.size is not None and block.size > max_bytes:
            raise InputError(
                f"{block.name} is {human_size(block.size)}, over the {human_size(max_bytes)} "
                f"limit ({setting})",
                hint="send a smaller file",
            )
        adapter = self.outbox.adapter(block.channel)
        if adapter is None:
            raise InputError(f"{block.name} cannot be fetched: {block.channel} is not connected")
        try:
            async with asyncio.timeout(self.timeout):
                data = await adapter.fetch_attachment(block.attachment, max_bytes)
        except TimeoutError:
            raise InputError(
                f"downloading {block.name} took longer than {self.timeout:g} s",
                hint="try again in a moment",
            ) from None
        except ClawbotError:
            raise
        except Exception as exc:  # an adapter's own bug must not end the turn
            log.exception("fetching %s from %s failed", block.name, block.channel)
            raise InputError(f"could not download {block.name} ({type(exc).__name__})") from None
        if len(data) > max_bytes:  # an adapter that read more than it was allowed
            raise InputError(
                f"{block.name} is over the {human_size(max_bytes)} limit ({setting})",
                hint="send a smaller file",
            )
        return data
