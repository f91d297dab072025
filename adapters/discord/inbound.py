"""Discord messages into InboundMessages: where a message was said (a thread belongs to its
parent channel), whether it addresses the bot (its @-mention or managed role, a reply to it),
what it replies to and the attachments it carries.
"""

from __future__ import annotations

import logging
import mimetypes
import re

import discord

from clawbot.messages import Attachment, ChatType, InboundMessage, ReplyContext

log = logging.getLogger(__name__)

CHANNEL = "discord"
_REPLY_TYPES = (discord.MessageType.default, discord.MessageType.reply)
_THREAD_TYPES = (
    discord.ChannelType.public_thread,
    discord.ChannelType.private_thread,
    discord.ChannelType.news_thread,
)


def inbound_from_message(
    message: discord.Message, *, bot_user_id: int, ignore_other_bots: bool = True
) -> InboundMessage | None:
    """Normalize one discord.py message; None for anything the bot must not answer.

    Never raises: a malformed update is logged (without content or secrets) and skipped, so
    one bad payload cannot stop the receive loop.
    """
    try:
        return _inbound(message, bot_user_id, ignore_other_bots)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        log.warning(
            "discord: skipped a malformed message update %s (%s)",
            getattr(message, "id", "?"),
            type(exc).__name__,
        )
        return None


def _inbound(
    message: discord.Message, bot_user_id: int, ignore_other_bots: bool
) -> InboundMessage | None:
    author = message.author
    if author.id == bot_user_id:
        return None
    if author.bot and ignore_other_bots:
        return None
    if message.type not in _REPLY_TYPES:
        return None  # joins, pins, thread-created notices and other system messages
    chat_type, chat_id, thread_id = place(message)
    text, mentioned = _strip_own_mentions(message, bot_user_id)
    reply_to, replied_author = _reply_context(message)
    if replied_author == bot_user_id:
        mentioned = True
    attachments = tuple(_attachment(item) for item in message.attachments)
    if not text and not attachments:
        return None
    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        chat_type=chat_type,
        thread_id=thread_id,
        sender_id=str(author.id),
        sender_name=author.display_name,
        text=text,
        message_id=str(message.id),
        mentioned=mentioned,
        reply_to=reply_to,
        attachments=attachments,
        received_at=message.created_at,  # when it was sent: catch-up is not a flood
    )


def place(message: discord.Message) -> tuple[ChatType, str, str | None]:
    """(chat_type, chat_id, thread_id): a thread's messages belong to its parent channel."""
    channel = message.channel
    if isinstance(channel, discord.Thread):
        return "group", str(channel.parent_id), str(channel.id)
    if isinstance(channel, discord.DMChannel):
        return "dm", str(channel.id), None
    if isinstance(channel, discord.TextChannel) and channel.is_news():
        return "channel", str(channel.id), None
    if isinstance(channel, discord.PartialMessageable):
        if channel.guild_id is None and channel.type not in _THREAD_TYPES:
            return "dm", str(channel.id), None
        return "group", str(channel.id), None  # an uncached channel: its parent is unknown
    if message.guild is None and not isinstance(channel, discord.GroupChannel):
        return "dm", str(channel.id), None
    return "group", str(channel.id), None


def _strip_own_mentions(message: discord.Message, bot_user_id: int) -> tuple[str, bool]:
    """The text without the bot's own @-mention, and whether there was one.

    Users may pick either the bot user (``<@id>``/``<@!id>``) or, in a guild, the bot's
    managed role (``<@&id>``) from the mention menu; both address the bot."""
    patterns = [rf"<@!?{bot_user_id}>"]
    mentioned = bot_user_id in message.raw_mentions or any(
        user.id == bot_user_id for user in message.mentions
    )
    guild = message.guild
    own_role = guild.self_role if guild is not None and guild.me is not None else None
    if own_role is not None and own_role.id in message.raw_role_mentions:
        patterns.append(rf"<@&{own_role.id}>")
        mentioned = True
    text = re.sub(rf"(?:{'|'.join(patterns)})[ \t]?", "", message.content)
    return text.strip(), mentioned


def _reply_context(message: discord.Message) -> tuple[ReplyContext | None, int | None]:
    reference = message.reference
    if reference is None or reference.message_id is None:
        return None, None
    if reference.type is discord.MessageReferenceType.forward:
        return None, None
    replied = reference.resolved
    if not isinstance(replied, discord.Message):
        replied = reference.cached_message
    if replied is None:
        return ReplyContext(message_id=str(reference.message_id)), None
    context = ReplyContext(
        message_id=str(replied.id),
        sender_name=replied.author.display_name,
        text=replied.content,
        from_bot=replied.author.bot,
    )
    return context, replied.author.id


def _attachment(item: discord.Attachment) -> Attachment:
    mime = item.content_type or mimetypes.guess_type(item.filename)[0]
    return Attachment(
        name=item.filename,
        mime_type=(mime or "application/octet-stream").split(";")[0].strip(),
        size=item.size,
        ref=item.url,
        duration=item.duration,  # a voice message's duration_secs
        voice=item.is_voice_message(),
    )
