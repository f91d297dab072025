"""Discord channel: discord.py 2.x ``discord.Client`` on the gateway, replies over REST.

Setup: create an application in the Discord developer portal, add a bot, put its token in
``CLAWBOT_DISCORD_TOKEN`` and enable the **Message Content** privileged intent (Bot →
Privileged Gateway Intents). Without that intent Discord refuses the connection (close code
4014) or, for unverified apps, hands guild messages over with empty text. The client asks for
the guilds, guild_messages, dm_messages and message_content intents and nothing else.

Two pure conversions carry the platform knowledge (``inbound_from_message`` in
``adapters.discord.inbound`` and ``outbound_arguments`` in ``adapters.discord.sending``);
``DiscordAdapter`` adds the connection lifecycle around them (the gateway's intents and
guarded parsers: ``adapters.discord.gateway``).

Discord never redelivers, so the adapter reads back what was posted while no gateway session
was up (within ``discord_catch_up_hours``): see ``adapters.discord.catch_up``.

A message's actions (approval requests) become buttons on its last part; a press is answered
at once (a deferred update) and runs as the presser's command: see ``adapters.discord.buttons``.

Rate limits: discord.py paces each bucket from Discord's headers and waits out a 429 itself
(``adapters.discord.sending``); what it gives up on reaches the chat's pacer as
``RateLimitedError``. Edits: ``adapters.discord.edits``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route
from pydantic import SecretStr

from adapters.discord.buttons import PressReplies, press_to_inbound, pressed_command, view_for
from adapters.discord.catch_up import CatchUp
from adapters.discord.downloads import CdnDownloads
from adapters.discord.edits import delete_message, edit_message, one_part
from adapters.discord.files import MAX_UPLOAD_BYTES, send_file
from adapters.discord.gateway import close_session, guard_parsers, intents, wait_ready
from adapters.discord.inbound import inbound_from_message, place
from adapters.discord.sending import (
    MAX_MESSAGE_CHARS,
    outbound_arguments,
    part_nonce,
    send_part,
    tell_not_taken_in,
)
from adapters.discord.setting_checks import settings_problems
from clawbot.channels.interface import (
    Adapter,
    ChannelLimits,
    ChatCursor,
    InboundHandler,
    SentMessage,
)
from clawbot.channels.rendering import render_parts
from clawbot.errors import ClawbotError, ConfigError, DeliveryError
from clawbot.messages import (
    Attachment,
    InboundMessage,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
)
from clawbot.settings import Settings

log = logging.getLogger(__name__)

CHANNEL = "discord"
DEFAULT_API_BASE = "https://discord.com/api/v10"
SEND_ATTEMPTS = 4
"""Adapter-level tries per part; discord.py itself already retries each 429 up to five times."""
LIMITS = ChannelLimits(
    max_message_chars=MAX_MESSAGE_CHARS,
    markup="discord_markdown",
    # What Discord's headers report for one channel: 5 messages per 5 s, and 5 edits per 5 s
    # in a bucket of their own; one call a second keeps within both.
    message_interval=1.0,
    edit_interval=1.0,
    max_upload_bytes=MAX_UPLOAD_BYTES,
    max_caption_chars=MAX_MESSAGE_CHARS,
)
CONNECT_TIMEOUT = 60.0
MAX_STOP_SECONDS = 10.0
DEFAULT_CATCH_UP = timedelta(hours=24)


class _Client(discord.Client):
    """discord.Client whose events go straight to the adapter."""

    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(**options)
        self._adapter = adapter

    async def on_connect(self) -> None:
        """Discord said READY: a new gateway session (a resumed one says RESUMED)."""
        self._adapter._connected.set()
        self._adapter._new_session()

    async def on_message(self, message: discord.Message) -> None:
        await self._adapter._receive(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._adapter._press(interaction)


class DiscordAdapter(Adapter):
    """Connects one Discord bot. One instance per process (see ``_point_library_at_api``)."""

    name = CHANNEL
    limits = LIMITS

    def __init__(
        self,
        token: SecretStr,
        *,
        api_base: str = DEFAULT_API_BASE,
        ignore_other_bots: bool = True,
        shutdown_timeout: float = MAX_STOP_SECONDS,
        send_attempts: int = SEND_ATTEMPTS,
        catch_up_window: timedelta = DEFAULT_CATCH_UP,
    ) -> None:
        self._token = token
        self._api_base = api_base.rstrip("/")
        self._ignore_other_bots = ignore_other_bots
        self._stop_timeout = min(shutdown_timeout, MAX_STOP_SECONDS)
        self._send_attempts = max(1, send_attempts)
        self._client: _Client | None = None
        self._connect_task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._intake = asyncio.Lock()
        self._accepting = False
        self._on_message: InboundHandler | None = None
        self._saved_endpoints: tuple[str, yarl.URL] | None = None
        self._downloads = CdnDownloads()
        self._presses = PressReplies()
        self._history = CatchUp(
            catch_up_window,
            client=lambda: self._client,
            intake=self._intake,
            take=self._take_missed,
        )

    def __repr__(self) -> str:
        return f"DiscordAdapter(api_base={self._api_base!r}, running={self._client is not None})"

    @property
    def catch_up_window(self) -> timedelta:
        return self._history.window

    @catch_up_window.setter
    def catch_up_window(self, window: timedelta) -> None:
        self._history.window = window

    # ---- settings ----

    @classmethod
    def is_configured(cls, settings: Settings) -> bool:
        token = settings.discord_token
        return token is not None and bool(token.get_secret_value().strip())

    @classmethod
    def check_settings(cls, settings: Settings) -> list[str]:
        return settings_problems(settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> DiscordAdapter:
        problems = cls.check_settings(settings)
        if problems or settings.discord_token is None:
            raise ConfigError("; ".join(problems) or "CLAWBOT_DISCORD_TOKEN is not set")
        return cls(
            settings.discord_token,
            api_base=settings.discord_api_base,
            ignore_other_bots=settings.ignore_other_bots,
            shutdown_timeout=settings.shutdown_timeout,
            catch_up_window=timedelta(hours=settings.discord_catch_up_hours),
        )

    # ---- connection ----

    def _point_library_at_api(self) -> None:
        """discord.py has no base-URL option: REST URLs come from the class attribute
        ``Route.BASE`` and the first gateway URL from ``DiscordWebSocket.DEFAULT_GATEWAY``.
        Both are set for this client's lifetime (and restored by ``stop``); the gateway URL is
        the one ``GET /gateway/bot`` returns, as Discord recommends. Being class attributes,
        they make two Discord adapters with different API bases in one process impossible."""
        if self._saved_endpoints is None:
            self._saved_endpoints = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        Route.BASE = self._api_base

    def _restore_library_endpoints(self) -> None:
        if self._saved_endpoints is not None:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = self._saved_endpoints
            self._saved_endpoints = None

    @property
    def exclusive_intake(self) -> str | None:
        """One gateway session per bot (this adapter runs shard 0 of 1): processes sharing a
        database open it one at a time. Named by the bot's user id, the first part of the
        token (its base64), never the token."""
        head = self._token.get_secret_value().strip().split(".")[0]
        try:
            user_id = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            user_id = ""
        return f"discord gateway bot {user_id if user_id.isdigit() else 'unknown'} shard 0"

    async def start_sending(self) -> None:
        """Log in over REST without opening the gateway: another process receives."""
        if self._client is None:
            await self._connecting(self._login())
            log.info("discord: logged in, sending only")

    async def start(self, on_message: InboundHandler) -> None:
        """Log in (unless ``start_sending`` did), open the gateway and return once Discord
        said READY. After ``stop_intake`` (which closed the gateway) it opens a new session;
        should the gateway still be up, it only receives again. Logged in before (this process
        sent only), it stays logged in if the gateway fails to open: it goes on sending.

        Reconnection afterwards is discord.py's own: on network loss it resumes the session
        (replaying missed events) with exponential backoff, until ``stop_intake``."""
        gateway_up = self._connect_task is not None and not self._connect_task.done()
        self._on_message = on_message
        self._accepting = True
        if gateway_up:
            return
        self._history.restart()
        await self._connecting(self._open_gateway(), keep_sending=self._client is not None)

    async def _login(self) -> None:
        self._point_library_at_api()
        client = _Client(self, intents=intents(), chunk_guilds_at_startup=False)
        guard_parsers(client)
        self._client = client
        await client.login(self._token.get_secret_value())

    async def _open_gateway(self) -> None:
        if self._client is None:
            await self._login()
        client = self._client
        assert client is not None
        self._connected.clear()
        _shards, gateway, _limits = await client.http.get_bot_gateway()
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)
        self._connect_task = asyncio.create_task(
            client.connect(reconnect=True), name="discord-gateway"
        )
        self._connect_task.add_done_callback(self._gateway_ended)
        await wait_ready(self._connected, self._connect_task, timeout=CONNECT_TIMEOUT)

    async def _connecting(self, step: Awaitable[None], *, keep_sending: bool = False) -> None:
        """Run a connecting step; on failure close everything (or, ``keep_sending``, only
        the gateway) and say what to do."""
        undo = self.stop_intake if keep_sending else self.stop
        try:
            await step
        except discord.LoginFailure:
            await undo()
            raise ConfigError(
                "Discord rejected CLAWBOT_DISCORD_TOKEN (401 Unauthorized)",
                hint="copy a fresh token from the developer portal (Bot → Reset Token)",
            ) from None
        except discord.PrivilegedIntentsRequired:
            await undo()
            raise ConfigError(
                "Discord refused the Message Content intent",
                hint="enable it in the developer portal: your app → Bot → Privileged Gateway "
                "Intents → Message Content",
            ) from None
        except (
            discord.HTTPException,
            discord.GatewayNotFound,
            discord.ConnectionClosed,
            aiohttp.ClientError,
            OSError,
            TimeoutError,
        ) as exc:
            await undo()
            raise ClawbotError(
                f"cannot connect to Discord at {self._api_base} ({type(exc).__name__})",
                hint="check the network and CLAWBOT_DISCORD_API_BASE",
            ) from None
        except BaseException:
            await undo()
            raise

    def _gateway_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or not self._accepting:
            return
        exc = task.exception()
        if exc is not None:
            log.error("discord: the gateway connection ended (%s: %s)", type(exc).__name__, exc)

    async def _receive(self, message: discord.Message) -> None:
        client = self._client
        if client is None or client.user is None or not self._accepting:
            return
        inbound = inbound_from_message(
            message, bot_user_id=client.user.id, ignore_other_bots=self._ignore_other_bots
        )
        if inbound is None:
            return
        # discord.py runs each event in its own task; the lock (FIFO) keeps arrival order.
        async with self._intake:
            await self._hand_over(inbound)

    async def _press(self, interaction: discord.Interaction) -> None:
        """A press of one of clawbot's buttons: answered at once (Discord shows the presser
        "interaction failed" after 3 s), then handed over as the presser's command; its reply
        goes to the chat like any command's."""
        command = pressed_command(interaction)
        if command is None:
            return
        try:
            await interaction.response.defer()
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning("discord: answering a button press failed (%s)", type(exc).__name__)
        handler, message = self._on_message, interaction.message
        if handler is None or message is None or not self._accepting:
            return
        chat_type, chat_id, thread_id = place(message)
        inbound = press_to_inbound(
            interaction, command, chat_type=chat_type, chat_id=chat_id, thread_id=thread_id
        )
        if inbound is None:
            return
        try:
            with self._presses.handling(inbound, interaction):
                await handler(inbound)
        except Exception:
            log.exception("discord: the handler failed on button press %s", inbound.message_id)
            await tell_not_taken_in(self._client, inbound)

    async def _hand_over(self, inbound: InboundMessage) -> bool:
        """Give one message to ``on_message`` (the intake lock held); whether it was taken."""
        handler = self._on_message
        if handler is None or not self._accepting:
            return False
        try:
            await handler(inbound)
        except Exception:
            log.exception("discord: the message handler failed on %s", inbound.message_id)
            await tell_not_taken_in(self._client, inbound)
            return False
        self._history.remember(inbound)
        return True

    # ---- catching up ----

    async def catch_up(self, chats: Sequence[ChatCursor]) -> int:
        return await self._history.run(chats)

    async def _take_missed(self, message: discord.Message, bot_user_id: int) -> bool:
        inbound = inbound_from_message(
            message, bot_user_id=bot_user_id, ignore_other_bots=self._ignore_other_bots
        )
        return inbound is not None and await self._hand_over(inbound)

    def _new_session(self) -> None:
        self._history.new_session(accepting=self._accepting)

    async def stop_intake(self) -> None:
        """Ignore messages from now on and end this process's gateway session, so that
        another process may open the shard's (a lost leader lock) and none is left half
        open; REST stays up so running turns can reply."""
        self._accepting = False
        await self._history.stop()
        await self._close_gateway()

    async def _close_gateway(self) -> None:
        """End the gateway session, keep the REST login; ``start`` opens a new one."""
        receiving, self._connect_task = self._connect_task, None
        self._connected.clear()
        await close_session(self._client, receiving, timeout=self._stop_timeout)

    async def stop(self) -> None:
        """Stop intake, close the gateway and HTTP sessions; bounded, idempotent."""
        await self.stop_intake()
        self._on_message = None
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), timeout=self._stop_timeout)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                log.warning("discord: closing the connection failed (%s)", type(exc).__name__)
        await self._downloads.close()
        self._restore_library_endpoints()

    # ---- outbound ----

    def _running_client(self, chat_id: str) -> _Client:
        client = self._client
        if client is None or client.is_closed():
            raise DeliveryError(f"discord is not connected; cannot deliver to chat {chat_id}")
        return client

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        if await self._presses.answered_privately(message):
            return [SentMessage(channel=CHANNEL, chat_id=message.chat_id)]
        client = self._running_client(message.chat_id)
        target_id = message.thread_id or message.chat_id
        if not target_id.isdigit():
            raise DeliveryError(f"discord chat id {target_id!r} is not a Discord channel id")
        target = client.get_partial_messageable(int(target_id))
        parts = render_parts(message.text, self.limits)
        key = message.idempotency_key
        sent: list[SentMessage] = []
        for index, part in enumerate(parts):
            reply_to = message.reply_to_message_id if index == 0 else None
            last = index == len(parts) - 1
            view = view_for(message.actions) if last and message.actions else None
            try:
                posted = await send_part(
                    target,
                    part,
                    reply_to,
                    message.chat_id,
                    view,
                    attempts=self._send_attempts,
                    nonce=part_nonce(key, index) if key is not None else None,
                )
            except DeliveryError as exc:
                if not sent:
                    raise  # nothing was posted: a RateLimitedError may be sent again whole
                raise DeliveryError(
                    f"{exc.message} (after {len(sent)} of {len(parts)} parts were delivered)"
                ) from None
            sent.append(
                SentMessage(channel=CHANNEL, chat_id=message.chat_id, message_id=str(posted.id))
            )
        return sent

    async def send_file(self, file: OutboundFile) -> list[SentMessage]:
        """The file as a message's attachment (``adapters.discord.files``)."""
        target_id = file.thread_id or file.chat_id
        if not target_id.isdigit():
            raise DeliveryError(f"discord chat id {target_id!r} is not a Discord channel id")
        target = self._running_client(file.chat_id).get_partial_messageable(int(target_id))
        posted = await send_file(target, file, self.limits, attempts=self._send_attempts)
        return [SentMessage(channel=CHANNEL, chat_id=file.chat_id, message_id=str(posted.id))]

    async def edit(self, edit: OutboundEdit) -> None:
        """Rewrite a message to a text that fits one, without buttons (``edits``)."""
        target_id = edit.thread_id or edit.chat_id
        if not target_id.isdigit() or not edit.message_id.isdigit():
            raise DeliveryError(f"discord message {edit.message_id!r} cannot be edited")
        part = one_part(edit.text, self.limits)
        target = self._running_client(edit.chat_id).get_partial_messageable(int(target_id))
        await edit_message(target, edit, outbound_arguments(part, channel_id=target.id))

    async def delete(self, deletion: OutboundDeletion) -> None:
        """Delete a message of the bot's (``edits``)."""
        target_id = deletion.thread_id or deletion.chat_id
        if not target_id.isdigit() or not deletion.message_id.isdigit():
            raise DeliveryError(f"discord message {deletion.message_id!r} cannot be deleted")
        target = self._running_client(deletion.chat_id).get_partial_messageable(int(target_id))
        await delete_message(target, deletion)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Best effort: a lost typing indicator is not worth failing a turn over."""
        target_id = thread_id or chat_id
        client = self._client
        if client is None or client.is_closed() or not target_id.isdigit():
            return
        try:
            await client.get_partial_messageable(int(target_id)).typing()
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning(
                "discord: typing indicator for chat %s failed (%s)", chat_id, type(exc).__name__
            )

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """Download from the CDN URL the message carried (without the bot token)."""
        return await self._downloads.fetch(attachment, max_bytes)
