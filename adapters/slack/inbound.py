"""Slack events into InboundMessages: ``message`` and ``app_mention`` events (a channel
mention arrives as both: ``second_delivery`` spots the twin), who sent them, whether they
address the bot (a mention, a message in a thread it started), the files they carry.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from clawbot.messages import Attachment, InboundMessage, ReplyContext

log = logging.getLogger(__name__)

CHANNEL = "slack"
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_HANDLED_SUBTYPES = frozenset({"file_share", "thread_broadcast", "me_message", "bot_message"})
_UNUSABLE_FILE_MODES = frozenset({"tombstone", "hidden_by_limit", "external"})


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is on Slack, from ``auth.test``: its user id (mentions) and bot id."""

    user_id: str
    bot_id: str | None = None


def event_to_inbound(
    event: Any, *, bot: BotIdentity, ignore_other_bots: bool = True
) -> InboundMessage | None:
    """Normalize one Slack event; None for events that are not a usable user message.

    A malformed event is logged (its type only, never its content) and skipped, so one bad
    payload cannot stop the receive loop.
    """
    try:
        return _convert(event, bot, ignore_other_bots)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        kind = event.get("type") if isinstance(event, Mapping) else type(event).__name__
        log.warning("slack: skipped a malformed %r event (%s)", kind, type(exc).__name__)
        return None


def _convert(event: Any, bot: BotIdentity, ignore_other_bots: bool) -> InboundMessage | None:
    if not isinstance(event, Mapping):
        raise TypeError("event is not an object")
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return None
    subtype = event.get("subtype")
    if subtype is not None and subtype not in _HANDLED_SUBTYPES:
        return None  # edits, deletions, joins, topic changes ...
    user, bot_id = event.get("user"), event.get("bot_id")
    if user == bot.user_id or (bot_id and bot_id == bot.bot_id):
        return None
    if (bot_id or subtype == "bot_message") and ignore_other_bots:
        return None

    chat_id = _required_str(event, "channel")
    ts = _required_str(event, "ts")
    sender_id = user or bot_id
    if not isinstance(sender_id, str) or not sender_id:
        raise ValueError("event has no sender")
    raw_text = event.get("text") or ""
    if not isinstance(raw_text, str):
        raise TypeError("text is not a string")

    mentioned = kind == "app_mention" or any(
        match.group(1) == bot.user_id for match in _MENTION.finditer(raw_text)
    )
    text = strip_mention(raw_text, bot.user_id)

    thread_ts = event.get("thread_ts") or None
    if thread_ts is not None and not isinstance(thread_ts, str):
        raise TypeError("thread_ts is not a string")
    reply_to = None
    if thread_ts and thread_ts != ts:
        from_bot = event.get("parent_user_id") == bot.user_id
        reply_to = ReplyContext(message_id=thread_ts, from_bot=from_bot)
        mentioned = mentioned or from_bot

    attachments = tuple(
        _attachment(item)
        for item in event.get("files") or ()
        if isinstance(item, Mapping) and item.get("mode") not in _UNUSABLE_FILE_MODES
    )
    if not text and not attachments:
        return None

    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        chat_type=_chat_type(event, chat_id),
        thread_id=thread_ts,
        sender_id=sender_id,
        sender_name=_sender_name(event),
        text=text,
        message_id=ts,
        mentioned=mentioned,
        reply_to=reply_to,
        attachments=attachments,
        received_at=_sent_at(ts),
    )


def strip_mention(text: str, bot_user_id: str) -> str:
    """Drop the bot's own ``<@U…>`` mentions and undo Slack's ``&amp; &lt; &gt;`` escaping."""
    own = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>[ \t]?")
    without = own.sub("", text).strip()
    return without.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _chat_type(event: Mapping[str, Any], chat_id: str) -> Literal["dm", "group"]:
    channel_type = event.get("channel_type")
    if channel_type == "im" or (channel_type is None and chat_id.startswith("D")):
        return "dm"
    return "group"  # "channel", "group" (private channel), "mpim", or an app_mention


def _sender_name(event: Mapping[str, Any]) -> str:
    for key in ("user_profile", "bot_profile"):
        profile = event.get(key)
        if isinstance(profile, Mapping):
            for field in ("display_name", "real_name", "name"):
                value = profile.get(field)
                if isinstance(value, str) and value:
                    return value
    username = event.get("username")
    return username if isinstance(username, str) else ""


def _attachment(item: Mapping[str, Any]) -> Attachment:
    file_id = _required_str(item, "id")
    size = item.get("size")
    length = item.get("duration_ms")
    seconds = length / 1000 if isinstance(length, int) and not isinstance(length, bool) else None
    return Attachment(
        name=str(item.get("name") or item.get("title") or file_id),
        mime_type=str(item.get("mimetype") or "application/octet-stream"),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        ref=file_id,
        duration=seconds,
        voice=item.get("subtype") == "slack_audio",  # a clip recorded in Slack
    )


def _required_str(data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} is missing or not a string")
    return value


def second_delivery(seen: OrderedDict[tuple[str, str], str], event: Any) -> bool:
    """Whether this is the ``app_mention`` twin of a ``message`` already handled (or the
    reverse), by the (channel, ts) pairs ``seen`` so far. The same event type arriving again
    is a redelivery and is passed on."""
    if not isinstance(event, Mapping):
        return False
    channel, ts, kind = event.get("channel"), event.get("ts"), event.get("type")
    if not isinstance(channel, str) or not isinstance(ts, str) or not isinstance(kind, str):
        return False
    first = seen.setdefault((channel, ts), kind)
    if len(seen) > 2048:
        seen.popitem(last=False)
    return first != kind


def _sent_at(ts: str | None) -> datetime:
    """When Slack says the message was sent (its ``ts`` is epoch seconds): a retried event
    is not a flood. Now, when it cannot be read."""
    try:
        return datetime.fromtimestamp(float(ts or ""), UTC)
    except (ValueError, OverflowError, OSError):
        return datetime.now(UTC)
