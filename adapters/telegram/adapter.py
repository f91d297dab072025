"""The Telegram channel, on python-telegram-bot's ``Bot``.

``TelegramAdapter`` is the connection lifecycle: long polling by default, a webhook server as
the option. Intake is our own (``adapters.telegram.intake``) rather than PTB's ``Updater``,
which confirms an update to Telegram before it is stored; sending and the HTTP layer are PTB's.
Its parts: ``inbound`` (updates into InboundMessages), ``sending`` (parts into ``sendMessage``
calls), ``edits`` (``editMessageText`` and drafts), ``buttons``, ``setting_checks`` and
``redaction`` (the token kept out of the logs).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from telegram import Bot, CallbackQuery, Update
from telegram.constants import ChatAction
from telegram.error import BadRequest, TelegramError

from adapters.telegram.buttons import PressAnswers, press_to_inbound
from adapters.telegram.edits import delete_message, edit_text, one_part, send_draft_text
from adapters.telegram.files import MAX_CAPTION_CHARS, MAX_UPLOAD_BYTES, send_file
from adapters.telegram.inbound import BotIdentity, update_to_inbound
from adapters.telegram.intake import BotApiRequest, PollingIntake, WebhookIntake
from adapters.telegram.redaction import RedactToken, library_loggers
from adapters.telegram.sending import api_chat_id, send_part
from adapters.telegram.setting_checks import settings_problems, start_error
from clawbot.channels.interface import Adapter, ChannelLimits, InboundHandler, SentMessage
from clawbot.channels.rendering import render_parts
from clawbot.errors import ClawbotError, ConfigError, DeliveryError, InputError
from clawbot.messages import (
    Attachment,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
)
from clawbot.settings import Settings

log = logging.getLogger(__name__)

CHANNEL = "telegram"
ALLOWED_UPDATES = ("message", "channel_post", "callback_query")
"""Edits, reactions and membership changes are not new turns; a button press is a command."""

POLL_TIMEOUT = 30
"""Seconds the Bot API holds a getUpdates call open (long polling)."""

LIMITS = ChannelLimits(
    max_message_chars=4096,
    markup="telegram_html",
    length_unit="utf16",
    # The Bot FAQ: "avoid sending more than one message per second" in one chat; edits and
    # drafts count as such calls (Telegram's flood control meets streamed edits too).
    message_interval=1.0,
    edit_interval=1.0,
    # sendMessageDraft (Bot API 9.3): a private chat shows a reply growing in a draft.
    drafts=True,
    max_upload_bytes=MAX_UPLOAD_BYTES,
    max_caption_chars=MAX_CAPTION_CHARS,
)
"""A private chat's limits (and the channel's, where no chat is named)."""
GROUP_LIMITS = replace(LIMITS, edit_interval=5.0)
"""A group's or channel's: the Bot FAQ's "not more than 20 messages per minute to the same
group". A message still goes a second after the last call (an approval answered, the next
part of a reply), but a streamed preview is edited only every 5 s: 12 edits a minute, the
rest of the 20 left for the messages and the final edits of a reply."""


class TelegramAdapter(Adapter):
    """Telegram through python-telegram-bot, pointed at ``settings.telegram_api_base``."""

    name = CHANNEL
    limits = LIMITS

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._api: Bot | None = None
        self._intake: PollingIntake | WebhookIntake | None = None
        self._identity: BotIdentity | None = None
        self._on_message: InboundHandler | None = None
        self._lock = asyncio.Lock()
        secrets = [settings.telegram_token.get_secret_value()] if settings.telegram_token else []
        if settings.telegram_webhook_secret is not None:
            secrets.append(settings.telegram_webhook_secret.get_secret_value())
        self._redactor = RedactToken(secrets)
        self._filtered: list[logging.Logger] = []
        self._presses = PressAnswers(self._scrub)

    def __repr__(self) -> str:
        return f"TelegramAdapter(mode={self._settings.telegram_mode!r}, running={self.running})"

    @property
    def running(self) -> bool:
        return self._api is not None

    @property
    def identity(self) -> BotIdentity | None:
        """The bot's id and username once started (from getMe)."""
        return self._identity

    # settings

    @classmethod
    def from_settings(cls, settings: Settings) -> TelegramAdapter:
        return cls(settings)

    @classmethod
    def is_configured(cls, settings: Settings) -> bool:
        token = settings.telegram_token
        return token is not None and bool(token.get_secret_value().strip())

    @classmethod
    def check_settings(cls, settings: Settings) -> list[str]:
        return settings_problems(settings)

    # lifecycle

    @property
    def exclusive_intake(self) -> str | None:
        """Long polling is allowed once per bot (Telegram ends one of two concurrent
        ``getUpdates`` with 409 Conflict); a webhook may be served by every process. Named
        by the bot's id, the public part of its token before the colon."""
        if self._settings.telegram_mode == "webhook" or self._settings.telegram_token is None:
            return None
        bot_id = self._settings.telegram_token.get_secret_value().strip().partition(":")[0]
        return f"telegram polling bot {bot_id if bot_id.isdigit() else 'unknown'}"

    async def start_sending(self) -> None:
        """Connect (``getMe``) without receiving: another process holds the long polling."""
        async with self._lock:
            await self._connect()
            assert self._identity is not None
            log.info("telegram: connected as @%s, sending only", self._identity.username)

    async def start(self, on_message: InboundHandler) -> None:
        """Connect if not yet connected, and begin receiving (again, after ``stop_intake``)."""
        async with self._lock:
            connected_here = self._api is None
            await self._connect()
            if self._intake is not None:
                return
            api = self._api
            assert api is not None and self._identity is not None
            self._on_message = on_message
            intake = self._build_intake(api)
            try:
                await intake.start()
            except BaseException as exc:
                self._on_message = None
                if connected_here:
                    self._api = None
                    await self._shutdown_quietly(api)
                    self._remove_redaction()
                if isinstance(exc, Exception):
                    raise start_error(exc, self._settings, self._scrub) from None
                raise
            self._intake = intake
            log.info(
                "telegram: connected as @%s (%s)",
                self._identity.username,
                self._settings.telegram_mode,
            )

    async def _connect(self) -> None:
        """The Bot, initialized (``getMe``), unless it is already; under ``_lock``."""
        if self._api is not None:
            return
        problems = self.check_settings(self._settings)
        if problems:
            raise ConfigError("telegram: " + "; ".join(problems))
        self._install_redaction()
        api = self._build_bot()
        try:
            await api.initialize()  # getMe
        except BaseException as exc:
            await self._shutdown_quietly(api)
            self._remove_redaction()
            if isinstance(exc, Exception):
                raise start_error(exc, self._settings, self._scrub) from None
            raise
        self._identity = BotIdentity(id=api.id, username=api.username)
        self._api = api

    def _build_bot(self) -> Bot:
        assert self._settings.telegram_token is not None
        return Bot(
            self._settings.telegram_token.get_secret_value().strip(),
            base_url=self._settings.telegram_api_base,
            base_file_url=self._settings.telegram_file_base,
            request=BotApiRequest(
                connection_pool_size=64, connect_timeout=10.0, read_timeout=20.0, write_timeout=20.0
            ),
            # Two connections: the confirming call at shutdown must not wait for the pool
            # while the cancelled long poll is still letting go of its connection.
            get_updates_request=BotApiRequest(
                connection_pool_size=2,
                connect_timeout=10.0,
                read_timeout=10.0,
                write_timeout=20.0,
                pool_timeout=5.0,
            ),
        )

    def _build_intake(self, api: Bot) -> PollingIntake | WebhookIntake:
        settings = self._settings
        if settings.telegram_mode == "webhook":
            assert settings.telegram_webhook_secret is not None
            return WebhookIntake(
                api,
                self._handle_update,
                listen=settings.telegram_webhook_listen,
                port=settings.telegram_webhook_port,
                path=settings.telegram_webhook_path,
                url=settings.telegram_webhook_url,
                secret=settings.telegram_webhook_secret.get_secret_value(),
                allowed_updates=ALLOWED_UPDATES,
            )
        return PollingIntake(
            api,
            self._handle_update,
            timeout=POLL_TIMEOUT,
            allowed_updates=ALLOWED_UPDATES,
            scrub=self._scrub,
        )

    async def stop_intake(self) -> None:
        """Stop receiving: a waiting long poll ends at once, an update being stored finishes
        and is confirmed; the bot stays usable for replies until ``stop``."""
        async with self._lock:
            intake, self._intake = self._intake, None
            if intake is None:
                return
            try:
                async with asyncio.timeout(self._settings.shutdown_timeout):
                    await intake.stop()
            except TimeoutError:
                log.warning("telegram: stopping intake took too long; continuing the shutdown")

    async def stop(self) -> None:
        await self.stop_intake()
        async with self._lock:
            api, self._api = self._api, None
            if api is None:
                return
            try:
                await asyncio.wait_for(self._shutdown_quietly(api), self._settings.shutdown_timeout)
            except TimeoutError:
                log.warning(
                    "telegram: shutdown took longer than %.0fs; abandoned it",
                    self._settings.shutdown_timeout,
                )
            finally:
                self._on_message = None
                self._remove_redaction()

    async def _shutdown_quietly(self, api: Bot) -> None:
        try:
            await api.shutdown()
        except Exception as exc:
            log.info("telegram: closing the connections failed: %s", self._scrub(str(exc)))

    async def _handle_update(self, update: Update) -> None:
        """Convert and hand over one update; returns once ``on_message`` has (the message is
        stored), and the intake confirms the update to Telegram only then."""
        identity, handler = self._identity, self._on_message
        if identity is None or handler is None:
            return
        if update.callback_query is not None:
            await self._handle_press(update.callback_query, identity, handler)
            return
        inbound = update_to_inbound(
            update, identity, ignore_other_bots=self._settings.ignore_other_bots
        )
        if inbound is not None:
            await handler(inbound)

    async def _handle_press(
        self, query: CallbackQuery, identity: BotIdentity, handler: InboundHandler
    ) -> None:
        """A button press, handed over as the presser's command, then answered (Telegram keeps
        the button spinning until it is): privately with the command's answer when that is
        for the presser alone, else plainly and the answer goes to the chat."""
        inbound = press_to_inbound(query, bot_id=identity.id)
        async with self._presses.handling(self._bot(), query):
            if inbound is not None:
                await handler(inbound)

    # outbound

    def _bot(self) -> Any:
        if self._api is None:
            raise DeliveryError("the telegram adapter is not started")
        return self._api

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        bot = self._bot()
        if await self._presses.answered_privately(bot, message):
            return [SentMessage(CHANNEL, message.chat_id)]
        parts = render_parts(message.text, self.limits)
        sent: list[SentMessage] = []
        for index, part in enumerate(parts):
            try:
                result = await send_part(
                    bot,
                    part,
                    message,
                    first=index == 0,
                    last=index == len(parts) - 1,
                    scrub=self._scrub,
                    wait_out=bool(sent),
                )
            except DeliveryError as exc:
                if not sent:
                    raise  # nothing was posted: a RateLimitedError may be sent again whole
                raise DeliveryError(
                    f"{exc.message} (after {len(sent)} of {len(parts)} parts were delivered)"
                ) from None
            sent.append(SentMessage(CHANNEL, message.chat_id, str(result.message_id)))
        return sent

    async def send_file(self, file: OutboundFile) -> list[SentMessage]:
        """A photo, voice note, audio or document (``adapters.telegram.files``)."""
        result = await send_file(self._bot(), file, self.limits, scrub=self._scrub)
        return [SentMessage(CHANNEL, file.chat_id, str(result.message_id))]

    def limits_for(self, chat_id: str) -> ChannelLimits:
        """A private chat's limits for a person's chat (a positive id), a group's otherwise
        (groups, supergroups and channels have negative ids or ``@username``)."""
        return LIMITS if chat_id.isdigit() else GROUP_LIMITS

    async def edit(self, edit: OutboundEdit) -> None:
        """``editMessageText`` to a text that fits one message, without buttons; raises
        ``RateLimitedError`` under flood control (see ``adapters.telegram.edits``)."""
        part = one_part(edit.text, self.limits, "an edit")
        await edit_text(self._bot(), edit, part, api_chat_id(edit.chat_id), scrub=self._scrub)

    async def delete(self, deletion: OutboundDeletion) -> None:
        """``deleteMessage``; ``RateLimitedError`` under flood control."""
        chat_id = api_chat_id(deletion.chat_id)
        await delete_message(self._bot(), deletion, chat_id, scrub=self._scrub)

    async def send_draft(self, chat_id: str, draft_id: int, text: str) -> None:
        """``sendMessageDraft``: ``text`` rendered as a message is, in a private chat;
        raises ``RateLimitedError`` under flood control, ``DeliveryError`` in a group."""
        part = one_part(text, self.limits, "a draft")
        await send_draft_text(self._bot(), chat_id, draft_id, part, scrub=self._scrub)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Best effort: a failed typing indicator must never fail the turn. Shielded: the
        indicator is cancelled with its turn's end, often mid-request, and an httpx request
        cancelled mid-flight never gives its connection back to the pool (httpx 0.28.1,
        httpcore 1.0.9): after some 64 of them every call, replies included, timed out
        waiting for one. The request finishes in the background instead."""
        try:
            await asyncio.shield(
                self._bot().send_chat_action(
                    chat_id=api_chat_id(chat_id),
                    action=ChatAction.TYPING,
                    message_thread_id=int(thread_id) if thread_id else None,
                )
            )
        except (TelegramError, DeliveryError) as exc:
            log.warning(
                "telegram: typing indicator for chat %s failed: %s", chat_id, self._scrub(str(exc))
            )

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """Refuse before downloading when the size is known, and check again after."""
        if attachment.size is not None and attachment.size > max_bytes:
            raise self._too_large(attachment, attachment.size, max_bytes)
        bot = self._bot()
        try:
            remote = await bot.get_file(attachment.ref)
            if remote.file_size is not None and remote.file_size > max_bytes:
                raise self._too_large(attachment, remote.file_size, max_bytes)
            data = bytes(await remote.download_as_bytearray())
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                raise InputError(
                    f"attachment {attachment.name!r} is too large for Telegram bots to download"
                ) from None
            raise InputError(
                f"cannot fetch attachment {attachment.name!r}: {self._scrub(exc.message)}"
            ) from None
        except TelegramError as exc:
            raise ClawbotError(
                f"cannot fetch attachment {attachment.name!r} from telegram: "
                f"{self._scrub(exc.message)}",
                hint="try again in a moment",
            ) from None
        if len(data) > max_bytes:
            raise self._too_large(attachment, len(data), max_bytes)
        return data

    @staticmethod
    def _too_large(attachment: Attachment, size: int, max_bytes: int) -> InputError:
        return InputError(
            f"attachment {attachment.name!r} is {size} bytes, over the {max_bytes}-byte limit"
        )

    # secrets

    def _scrub(self, text: str) -> str:
        return self._redactor.scrub(text)

    def _install_redaction(self) -> None:
        self._filtered = library_loggers()
        for logger in self._filtered:
            logger.addFilter(self._redactor)

    def _remove_redaction(self) -> None:
        for logger in self._filtered:
            logger.removeFilter(self._redactor)
        self._filtered = []
