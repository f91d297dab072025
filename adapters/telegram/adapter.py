"""The Telegram channel, on python-telegram-bot's ``Bot``.

Two pure conversions (``update_to_inbound``, ``part_to_send_kwargs``) plus the connection
lifecycle: long polling by default, a webhook server as the option. Intake is our own
(``adapters.telegram.intake``) rather than PTB's ``Updater``, which confirms an update to
Telegram before it is stored; sending and the HTTP layer are PTB's.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from telegram import Bot, CallbackQuery, Message, MessageEntity, ReplyParameters, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TelegramError

from adapters.telegram.buttons import PressAnswers, edit_text, keyboard, press_to_inbound
from adapters.telegram.intake import (
    BotApiRequest,
    NotTheBotApi,
    PollingIntake,
    WebhookIntake,
)
from clawbot.channels.interface import Adapter, ChannelLimits, InboundHandler, SentMessage
from clawbot.channels.rendering import RenderedPart, render_parts
from clawbot.errors import ClawbotError, ConfigError, DeliveryError, InputError
from clawbot.messages import (
    Attachment,
    ChatType,
    InboundMessage,
    OutboundEdit,
    OutboundMessage,
    ReplyContext,
)
from clawbot.settings import Settings

log = logging.getLogger(__name__)

CHANNEL = "telegram"
ALLOWED_UPDATES = ("message", "channel_post", "callback_query")
"""Edits, reactions and membership changes are not new turns; a button press is a command."""

POLL_TIMEOUT = 30
"""Seconds the Bot API holds a getUpdates call open (long polling)."""

MAX_SEND_ATTEMPTS = 5
MAX_RETRY_AFTER = 60.0
"""A longer server-requested pause would stall the turn; fail visibly instead."""

_TOKEN_RE = re.compile(r"\d{3,}:[A-Za-z0-9_-]{30,}")
_WEBHOOK_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
_CHAT_ID_RE = re.compile(r"-?\d+")
_RETRY_IN_RE = re.compile(r"retry (?:after|in) (\d+(?:\.\d+)?)", re.IGNORECASE)
_LEADING_JUNK = " \t,:;"
_CHAT_TYPES: dict[str, ChatType] = {"private": "dm", "channel": "channel"}


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is, from getMe: needed to spot its own messages and its mentions."""

    id: int
    username: str


# ---------------------------------------------------------------- inbound conversion


def update_to_inbound(
    update: Update, bot: BotIdentity, *, ignore_other_bots: bool = True
) -> InboundMessage | None:
    """Normalize one update; None for updates to ignore (own, other bots', nothing usable).

    Never raises: a malformed update is logged (without its content) and skipped.
    """
    try:
        return _convert(update, bot, ignore_other_bots)
    except Exception as exc:
        log.warning(
            "telegram: skipped malformed update %s (%s)",
            getattr(update, "update_id", "?"),
            type(exc).__name__,
        )
        return None


def _convert(update: Update, bot: BotIdentity, ignore_other_bots: bool) -> InboundMessage | None:
    message = update.message or update.channel_post
    if message is None:
        return None
    chat_type: ChatType = _CHAT_TYPES.get(message.chat.type, "group")

    sender = _sender(message)
    if sender is None:
        return None
    sender_id, sender_name, sender_is_bot = sender
    if message.from_user is not None and message.from_user.id == bot.id:
        return None
    if sender_is_bot and ignore_other_bots:
        return None

    if message.text is not None:
        raw_text, entities = message.text, message.entities
    else:
        raw_text, entities = message.caption or "", message.caption_entities
    mentioned, text = strip_bot_mentions(raw_text, entities, bot)

    thread_id: str | None = None
    if message.is_topic_message and message.message_thread_id is not None:
        thread_id = str(message.message_thread_id)

    reply_to: ReplyContext | None = None
    replied = message.reply_to_message
    # In a forum topic every message "replies" to the topic's creation message: not a reply.
    if (
        replied is not None
        and replied.forum_topic_created is None
        and not (thread_id is not None and replied.message_id == message.message_thread_id)
    ):
        author = replied.from_user
        if author is not None and author.id == bot.id:
            mentioned = True
        reply_to = ReplyContext(
            message_id=str(replied.message_id),
            sender_name=_display_name(replied),
            text=replied.text or replied.caption or "",
            from_bot=bool(author is not None and author.is_bot),
        )

    attachments = attachments_of(message)
    if not text and not attachments:
        return None
    return InboundMessage(
        channel=CHANNEL,
        chat_id=str(message.chat.id),
        chat_type=chat_type,
        thread_id=thread_id,
        sender_id=sender_id,
        sender_name=sender_name,
        text=text,
        message_id=str(message.message_id),
        mentioned=mentioned,
        reply_to=reply_to,
        attachments=tuple(attachments),
        received_at=message.date,
    )


def _sender(message: Message) -> tuple[str, str, bool] | None:
    """(id, name, is_bot). Posts on behalf of a chat (channels, anonymous admins) come from
    the chat, not from the placeholder bot user Telegram puts in ``from``."""
    if message.sender_chat is not None:
        chat = message.sender_chat
        name = chat.title or chat.username or chat.full_name or str(chat.id)
        return str(chat.id), name, False
    if message.from_user is not None:
        user = message.from_user
        return str(user.id), user.full_name, user.is_bot
    return None


def _display_name(message: Message) -> str:
    sender = _sender(message)
    return sender[1] if sender else ""


def strip_bot_mentions(
    text: str, entities: tuple[MessageEntity, ...] | None, bot: BotIdentity
) -> tuple[bool, str]:
    """Remove the bot's own @mention / text_mention (and ``/cmd@bot`` suffixes) from the text.

    Entity offsets count UTF-16 code units, hence the re-encoding.
    """
    if not entities:
        return False, text.strip()
    units = text.encode("utf-16-le")
    handle = f"@{bot.username}".lower()
    spans: list[tuple[int, int, str]] = []
    for entity in entities:
        start = len(units[: entity.offset * 2].decode("utf-16-le"))
        segment = units[entity.offset * 2 : (entity.offset + entity.length) * 2].decode("utf-16-le")
        end = start + len(segment)
        is_handle = entity.type == MessageEntity.MENTION and segment.lower() == handle
        is_named = (
            entity.type == MessageEntity.TEXT_MENTION
            and entity.user is not None
            and entity.user.id == bot.id
        )
        if is_handle or is_named:
            spans.append((start, end, ""))
        elif entity.type == MessageEntity.BOT_COMMAND and segment.lower().endswith(handle):
            spans.append((start, end, segment[: -len(handle)]))
    if not spans:
        return False, text.strip()
    out = ""
    pos = 0
    for start, end, replacement in sorted(spans):
        out += text[pos:start] + replacement
        pos = end
        if not replacement:
            rest = text[pos:]
            junk = _LEADING_JUNK if not out.strip() else " \t"
            if not out.strip() or out[-1:].isspace():
                pos += len(rest) - len(rest.lstrip(junk))
    out += text[pos:]
    return True, out.strip()


def attachments_of(message: Message) -> list[Attachment]:
    """Attachment metadata only; bytes are fetched on demand by ``fetch_attachment``."""
    found: list[Attachment] = []
    if message.animation is not None:  # Telegram also fills ``document`` for these
        a = message.animation
        found.append(
            _attachment(
                a.file_id, a.file_name or "animation.mp4", a.mime_type or "video/mp4", a.file_size
            )
        )
    elif message.document is not None:
        d = message.document
        found.append(
            _attachment(
                d.file_id,
                d.file_name or "document",
                d.mime_type or "application/octet-stream",
                d.file_size,
            )
        )
    if message.photo:
        p = message.photo[-1]  # the largest size
        found.append(
            _attachment(p.file_id, f"photo_{p.file_unique_id}.jpg", "image/jpeg", p.file_size)
        )
    if message.audio is not None:
        au = message.audio
        found.append(
            _attachment(
                au.file_id, au.file_name or "audio.mp3", au.mime_type or "audio/mpeg", au.file_size
            )
        )
    if message.voice is not None:
        v = message.voice
        found.append(_attachment(v.file_id, "voice.ogg", v.mime_type or "audio/ogg", v.file_size))
    if message.video is not None:
        vi = message.video
        found.append(
            _attachment(
                vi.file_id, vi.file_name or "video.mp4", vi.mime_type or "video/mp4", vi.file_size
            )
        )
    if message.video_note is not None:
        vn = message.video_note
        found.append(_attachment(vn.file_id, "video_note.mp4", "video/mp4", vn.file_size))
    if message.sticker is not None:
        s = message.sticker
        found.append(_attachment(s.file_id, "sticker.webp", "image/webp", s.file_size))
    return found


def _attachment(file_id: str, name: str, mime: str, size: int | None) -> Attachment:
    return Attachment(name=name, mime_type=mime, size=size, ref=file_id)


# ---------------------------------------------------------------- outbound conversion


def part_to_send_kwargs(
    part: RenderedPart,
    message: OutboundMessage,
    *,
    first: bool,
    plain: bool = False,
    last: bool = False,
) -> dict[str, Any]:
    """Arguments for ``Bot.send_message`` for one rendered part.

    Only the first part replies to the user's message (in a group; a DM shows no quote); the
    rest follow it in order, and the last carries the message's buttons (under the text they
    belong to).
    ``plain`` selects the part's plain-text fallback (after Telegram rejected the HTML).
    """
    formatted = part.markup == "telegram_html" and not plain
    kwargs: dict[str, Any] = {
        "chat_id": _chat_id(message.chat_id),
        "text": part.text if formatted or part.markup == "plain" else part.plain,
    }
    if formatted:
        kwargs["parse_mode"] = ParseMode.HTML
    if message.thread_id:
        kwargs["message_thread_id"] = int(message.thread_id)
    reply_to = message.reply_to_message_id
    in_a_group = not message.chat_id.isdigit()  # a person's own chat has a positive id
    if first and in_a_group and reply_to and reply_to.isdigit():
        kwargs["reply_parameters"] = ReplyParameters(
            message_id=int(reply_to), allow_sending_without_reply=True
        )
    markup = keyboard(message.actions) if last and message.actions else None
    if markup is not None:
        kwargs["reply_markup"] = markup
    return kwargs


def _chat_id(chat_id: str) -> int | str:
    """Numeric ids as ints; ``@channelusername`` stays a string."""
    return int(chat_id) if _CHAT_ID_RE.fullmatch(chat_id) else chat_id


def _is_parse_error(exc: TelegramError) -> bool:
    return "parse entities" in exc.message.lower()


def _rate_limit_wait(exc: TelegramError) -> float | None:
    """Seconds Telegram asked us to wait, or None if this is not a rate limit.

    PTB raises RetryAfter only for a truthy ``retry_after``; a 429 with ``retry_after: 0``
    surfaces as a NetworkError whose message starts "Too Many Requests".
    """
    if isinstance(exc, RetryAfter):
        value = exc.retry_after
        return value.total_seconds() if isinstance(value, timedelta) else float(value)
    if isinstance(exc, NetworkError) and exc.message.lower().startswith("too many requests"):
        match = _RETRY_IN_RE.search(exc.message)
        return float(match.group(1)) if match else 1.0
    return None


# ---------------------------------------------------------------- secrets in logs


class _RedactToken(logging.Filter):
    """Scrubs the bot token from log records: PTB and httpx log request URLs, which carry it."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "<redacted>")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        clean = self.scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            formatted = logging.Formatter().formatException(record.exc_info)
            if self.scrub(formatted) != formatted:
                record.exc_text = self.scrub(formatted)
        return True


def _library_loggers() -> list[logging.Logger]:
    families = {"telegram", "httpx", "httpcore", "aiohttp"}
    names = {"httpx", "httpcore", "aiohttp.server", "aiohttp.web", __name__}
    names.update(name for name in logging.root.manager.loggerDict if name.split(".")[0] in families)
    return [logging.getLogger(name) for name in sorted(names)]


# ---------------------------------------------------------------- the adapter


class TelegramAdapter(Adapter):
    """Telegram through python-telegram-bot, pointed at ``settings.telegram_api_base``."""

    name = CHANNEL
    limits = ChannelLimits(max_message_chars=4096, markup="telegram_html", length_unit="utf16")

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
        self._redactor = _RedactToken(secrets)
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
        problems: list[str] = []
        token = settings.telegram_token.get_secret_value() if settings.telegram_token else ""
        if not token:
            problems.append("CLAWBOT_TELEGRAM_TOKEN is not set (get one from @BotFather)")
        elif not _TOKEN_RE.fullmatch(token.strip()):
            problems.append(
                "CLAWBOT_TELEGRAM_TOKEN does not look like a bot token "
                "(expected digits, a colon and 30+ letters, digits, '-' or '_', from @BotFather)"
            )
        for env, url in (
            ("CLAWBOT_TELEGRAM_API_BASE", settings.telegram_api_base),
            ("CLAWBOT_TELEGRAM_FILE_BASE", settings.telegram_file_base),
        ):
            if not url.startswith(("http://", "https://")):
                problems.append(f"{env} must be an http(s) URL")
        if settings.telegram_mode == "webhook":
            problems.extend(cls._check_webhook(settings))
        return problems

    @staticmethod
    def _check_webhook(settings: Settings) -> list[str]:
        problems: list[str] = []
        url = settings.telegram_webhook_url
        if not url:
            problems.append("CLAWBOT_TELEGRAM_WEBHOOK_URL is required in webhook mode")
        elif settings.telegram_api_base.startswith("https://api.telegram.org") and not (
            url.startswith("https://")
        ):
            problems.append("CLAWBOT_TELEGRAM_WEBHOOK_URL must be https: Telegram refuses http")
        if not settings.telegram_webhook_path.startswith("/"):
            problems.append("CLAWBOT_TELEGRAM_WEBHOOK_PATH must start with '/'")
        secret = settings.telegram_webhook_secret
        if secret is None or not secret.get_secret_value():
            problems.append(
                "CLAWBOT_TELEGRAM_WEBHOOK_SECRET is required in webhook mode, so forged "
                "updates are refused"
            )
        elif not _WEBHOOK_SECRET_RE.fullmatch(secret.get_secret_value()):
            problems.append(
                "CLAWBOT_TELEGRAM_WEBHOOK_SECRET may only contain letters, digits, '-' and '_' "
                "(1-256 characters)"
            )
        return problems

    # lifecycle

    async def start(self, on_message: InboundHandler) -> None:
        async with self._lock:
            if self._api is not None:
                return
            problems = self.check_settings(self._settings)
            if problems:
                raise ConfigError("telegram: " + "; ".join(problems))
            self._install_redaction()
            api = self._build_bot()
            try:
                await api.initialize()  # getMe
                self._identity = BotIdentity(id=api.id, username=api.username)
                self._on_message = on_message
                intake = self._build_intake(api)
                await intake.start()
            except BaseException as exc:
                self._on_message = None
                await self._shutdown_quietly(api)
                self._remove_redaction()
                if isinstance(exc, Exception):
                    raise self._start_error(exc) from None
                raise
            self._api, self._intake = api, intake
            log.info(
                "telegram: connected as @%s (%s)",
                self._identity.username,
                self._settings.telegram_mode,
            )

    def _start_error(self, exc: Exception) -> ClawbotError:
        """What went wrong at start, in words that point at the setting to fix."""
        if isinstance(exc, NotTheBotApi):
            return ConfigError(
                f"CLAWBOT_TELEGRAM_API_BASE ({self._settings.telegram_api_base}) {exc.answer}: "
                "is it the Telegram Bot API?",
                hint="leave it unset for https://api.telegram.org/bot, or give your Bot API "
                "server's URL ending in /bot",
            )
        if isinstance(exc, InvalidToken):
            return ConfigError(
                "Telegram rejected the bot token",
                hint="check CLAWBOT_TELEGRAM_TOKEN (from @BotFather)",
            )
        if isinstance(exc, OSError):  # the webhook port
            return ConfigError(
                "telegram could not listen for the webhook on "
                f"{self._settings.telegram_webhook_listen}:{self._settings.telegram_webhook_port}"
                f": {exc.strerror or exc}",
                hint="choose a free port with CLAWBOT_TELEGRAM_WEBHOOK_PORT",
            )
        detail = self._scrub(exc.message if isinstance(exc, TelegramError) else str(exc))
        if isinstance(exc, BadRequest):  # (a NetworkError subclass in PTB)
            return ConfigError(
                f"Telegram refused to set up the bot: {detail}",
                hint="check CLAWBOT_TELEGRAM_WEBHOOK_URL and the other webhook settings"
                if self._settings.telegram_mode == "webhook"
                else "check the telegram settings",
            )
        if isinstance(exc, NetworkError):
            return ClawbotError(
                f"cannot reach the Telegram Bot API: {detail}",
                hint="check the network and CLAWBOT_TELEGRAM_API_BASE",
            )
        return ClawbotError(
            f"telegram could not start: {detail}", hint="check the telegram settings"
        )

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
                result = await self._send_part(
                    bot, part, message, first=index == 0, last=index == len(parts) - 1
                )
            except DeliveryError as exc:
                if sent:
                    exc.message += f" (after {len(sent)} of {len(parts)} parts were delivered)"
                raise
            sent.append(SentMessage(CHANNEL, message.chat_id, str(result.message_id)))
        return sent

    async def _send_part(
        self, bot: Any, part: RenderedPart, message: OutboundMessage, *, first: bool, last: bool
    ) -> Message:
        """Send one part: plain re-send on rejected markup, bounded waits on rate limits.

        Only errors where Telegram certainly did not post the message are retried, so a retry
        never duplicates one.
        """
        plain = False
        for _attempt in range(MAX_SEND_ATTEMPTS):
            kwargs = part_to_send_kwargs(part, message, first=first, plain=plain, last=last)
            try:
                result: Message = await bot.send_message(**kwargs)
                return result
            except BadRequest as exc:
                if not plain and "parse_mode" in kwargs and _is_parse_error(exc):
                    log.info(
                        "telegram: chat %s rejected formatting (%s); sending plain text",
                        message.chat_id,
                        exc.message,
                    )
                    plain = True
                    continue
                raise self._delivery_error(message, exc) from None
            except TelegramError as exc:
                wait = _rate_limit_wait(exc)
                if wait is None:
                    raise self._delivery_error(message, exc) from None
                if wait > MAX_RETRY_AFTER:
                    raise self._delivery_error(
                        message, exc, f"rate limited for {wait:.0f}s"
                    ) from None
                log.info(
                    "telegram: rate limited in chat %s; retrying in %.1fs", message.chat_id, wait
                )
                await asyncio.sleep(wait)
        raise self._delivery_error(message, None, f"still failing after {MAX_SEND_ATTEMPTS} tries")

    async def edit(self, edit: OutboundEdit) -> None:
        """``editMessageText`` of the part that carried the buttons (see ``edit_text``)."""
        part = render_parts(edit.text, self.limits)[-1]
        await edit_text(self._bot(), edit, part, _chat_id(edit.chat_id), scrub=self._scrub)

    def _delivery_error(
        self, message: OutboundMessage, exc: TelegramError | None, reason: str = ""
    ) -> DeliveryError:
        detail = reason or (self._scrub(exc.message) if exc is not None else "unknown error")
        return DeliveryError(f"telegram could not deliver to chat {message.chat_id}: {detail}")

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Best effort: a failed typing indicator must never fail the turn."""
        try:
            await self._bot().send_chat_action(
                chat_id=_chat_id(chat_id),
                action=ChatAction.TYPING,
                message_thread_id=int(thread_id) if thread_id else None,
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
        self._filtered = _library_loggers()
        for logger in self._filtered:
            logger.addFilter(self._redactor)

    def _remove_redaction(self) -> None:
        for logger in self._filtered:
            logger.removeFilter(self._redactor)
        self._filtered = []
