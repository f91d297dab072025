"""Reading back what Discord will not redeliver.

Discord never redelivers: a message posted while no gateway session is up (clawbot stopped,
crashed, or lost its session) is only in the channel's history. So on start, and whenever the
gateway had to start a new session, the adapter reads the history of the chats active within
the catch-up window after the last message it took from each, and hands what it finds over
like a live message, oldest first; the dedup ledger drops what was stored. A conversation that
never reached clawbot before (a first DM sent while it was down) has no session, so nothing
tells the adapter to read it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

import aiohttp
import discord

from clawbot.channels.interface import ChatCursor
from clawbot.messages import InboundMessage

log = logging.getLogger("adapters.discord")

TRACKED_CHATS = 10_000
"""Chats whose place is kept for a reread after a lost session, the most recently active
ones (as many as ``TRACKED_SENDERS`` in clawbot.routing.rate_limit): a chat beyond them is forgotten
as one quiet for longer than the window is."""

MessageTaker = Callable[[discord.Message, int], Awaitable[bool]]
"""``take(message, bot_user_id)``: convert and hand over one message from a chat's history
(the intake lock held); whether it was taken."""


class CatchUp:
    """Where each chat got (the last message taken from it), and reading each chat's history
    after that point, at start and after every new gateway session but the first."""

    def __init__(
        self,
        window: timedelta,
        *,
        client: Callable[[], discord.Client | None],
        intake: asyncio.Lock,
        take: MessageTaker,
    ) -> None:
        self.window = window
        self._client = client
        self._intake = intake
        self._take = take
        self._cursors: OrderedDict[tuple[str, str | None], ChatCursor] = OrderedDict()
        self._sessions = 0
        self._reread: asyncio.Task[int] | None = None

    async def run(self, chats: Sequence[ChatCursor]) -> int:
        """Hand over what was posted in ``chats`` after the last message taken from each (and
        within ``window``), oldest first. Live messages wait meanwhile (the intake lock), so
        they still come after the older ones they follow."""
        client = self._client()
        if client is None or client.user is None or self.window <= timedelta(0):
            return 0
        since = datetime.now(UTC) - self.window
        floor = discord.utils.time_snowflake(since)
        for chat in chats:  # so a lost session later rereads these chats too
            self._cursors.setdefault((chat.chat_id, chat.thread_id), chat)
        self._forget_beyond_tracked()
        handed = 0
        async with self._intake:
            for chat in chats:
                if chat.last_seen >= since:
                    handed += await self._read(client, client.user.id, chat, floor)
        return handed

    async def _read(
        self, client: discord.Client, bot_user_id: int, chat: ChatCursor, floor: int
    ) -> int:
        target_id = chat.thread_id or chat.chat_id
        last = chat.last_message_id or ""
        after = max(floor, int(last) if last.isdigit() else 0)
        handed = 0
        try:
            channel = client.get_channel(int(target_id)) or await client.fetch_channel(
                int(target_id)
            )
            if not isinstance(channel, discord.abc.Messageable):
                return 0
            history = channel.history(limit=None, after=discord.Object(after), oldest_first=True)
            async for message in history:
                if await self._take(message, bot_user_id):
                    handed += 1
        except (ValueError, discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.warning(
                "discord: could not read the messages missed in chat %s (%s); %d handed over",
                target_id,
                type(exc).__name__,
                handed,
            )
        return handed

    def remember(self, inbound: InboundMessage) -> None:
        """Note where ``inbound``'s chat got, for reading it again after a lost session; chats
        quiet for longer than the window, or beyond the TRACKED_CHATS most recently active,
        are forgotten, so this stays bounded."""
        now = datetime.now(UTC)
        key = (inbound.chat_id, inbound.thread_id)
        self._cursors.pop(key, None)
        self._cursors[key] = ChatCursor(
            chat_id=inbound.chat_id,
            thread_id=inbound.thread_id,
            last_message_id=inbound.message_id,
            last_seen=now,
        )
        while self._cursors:
            oldest = next(iter(self._cursors.values()))
            if oldest.last_seen >= now - self.window:
                break
            self._cursors.popitem(last=False)
        self._forget_beyond_tracked()

    def _forget_beyond_tracked(self) -> None:
        """Drop the least recently active chats over TRACKED_CHATS: the window alone lets
        the chats grow with the bot's traffic."""
        while len(self._cursors) > TRACKED_CHATS:
            self._cursors.popitem(last=False)

    def restart(self) -> None:
        """A new connection: its first gateway session is the start's again."""
        self._sessions = 0

    def new_session(self, *, accepting: bool) -> None:
        """The first session is the start's (the service asks for the catch-up then); a
        later one means the gateway could not resume (discord.py identifies anew, at most
        every 5 seconds), and what was posted meanwhile is missed."""
        self._sessions += 1
        if self._sessions == 1 or not accepting or not self._cursors:
            return
        if self._reread is not None and not self._reread.done():
            return
        log.info(
            "discord: new gateway session; reading %d chat(s) for missed messages",
            len(self._cursors),
        )
        self._reread = asyncio.create_task(
            self.run(list(self._cursors.values())), name="discord-catch-up"
        )

    async def stop(self) -> None:
        """Cancel a reread in flight and wait for it to end."""
        reread, self._reread = self._reread, None
        if reread is not None:
            reread.cancel()
            await asyncio.gather(reread, return_exceptions=True)
