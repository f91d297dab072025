"""Telegram updates into InboundMessages: who sent them, whether they address the bot (its
@mention, a ``/cmd@bot`` suffix, a reply to it), and the attachments they carry (metadata
only; the adapter fetches the bytes on demand).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from telegram import Message, MessageEntity, TelegramObject, Update

from clawbot.messages import Attachment, ChatType, InboundMessage, ReplyContext

log = logging.getLogger(__name__)

CHANNEL = "telegram"
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
                au.file_id,
                au.file_name or "audio.mp3",
                au.mime_type or "audio/mpeg",
                au.file_size,
                duration=_seconds(au),
            )
        )
    if message.voice is not None:
        v = message.voice
        found.append(
            _attachment(
                v.file_id,
                "voice.ogg",
                v.mime_type or "audio/ogg",
                v.file_size,
                duration=_seconds(v),
                voice=True,
            )
        )
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


def _attachment(
    file_id: str,
    name: str,
    mime: str,
    size: int | None,
    *,
    duration: float | None = None,
    voice: bool = False,
) -> Attachment:
    return Attachment(
        name=name, mime_type=mime, size=size, ref=file_id, duration=duration, voice=voice
    )


def _seconds(media: TelegramObject) -> float | None:
    """A voice note's or audio file's length in seconds, as the Bot API sent it (read from
    the wire form: the ``duration`` attribute warns that its type is about to change)."""
    duration = media.to_dict().get("duration")
    return float(duration) if isinstance(duration, int | float) else None
