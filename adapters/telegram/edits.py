"""Changing what a Telegram chat shows: ``editMessageText`` of a message the bot sent (an
answered approval, a streamed reply's preview), ``deleteMessage`` (a preview the reply no
longer needs) and ``sendMessageDraft`` (a reply growing in a private chat's draft, Bot API
9.3).

Both take one rendered part: a text that renders to more than one message is refused here,
before Telegram would refuse it, since an edit replaces one message (the live reply moves on
to a new message instead). Neither waits out Telegram's flood control: a 429 becomes
``RateLimitedError`` with Telegram's ``retry_after``, so the chat's pacer waits and the live
reply shows its newest text then, instead of a stale one sent late. "Message is not modified"
means the message shows this text already, which is what was wanted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot
from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from adapters.telegram.sending import flood_wait
from clawbot.channels.interface import ChannelLimits
from clawbot.channels.rendering import RenderedPart, render_parts
from clawbot.errors import DeliveryError, RateLimitedError
from clawbot.messages import OutboundDeletion, OutboundEdit

Scrub = Callable[[str], str]


def one_part(text: str, limits: ChannelLimits, what: str) -> RenderedPart:
    """``text`` rendered as the one message an edit or a draft can hold; ``DeliveryError``
    naming the limit when it renders to more (or to nothing)."""
    parts = render_parts(text, limits)
    if len(parts) != 1:
        raise DeliveryError(
            f"telegram cannot show {what} of {len(text)} characters: it renders to "
            f"{len(parts)} messages and one holds at most {limits.max_message_chars} UTF-16 units",
            hint="show the text up to the limit and send the rest as new messages",
        )
    return parts[0]


async def edit_text(
    bot: Bot,
    edit: OutboundEdit,
    part: RenderedPart,
    chat_id: int | str,
    *,
    scrub: Scrub,
) -> None:
    """Rewrite the message ``edit`` names to ``part``, its keyboard gone (no
    ``reply_markup``); plain text when Telegram refuses the HTML."""

    async def call(text: str, parse_mode: str | None) -> Any:
        return await bot.edit_message_text(
            chat_id=chat_id, message_id=int(edit.message_id), text=text, parse_mode=parse_mode
        )

    where = f"edit message {edit.message_id} in chat {edit.chat_id}"
    try:
        await _with_plain_fallback(call, part)
    except BadRequest as exc:
        if "message is not modified" not in exc.message.lower():
            raise _refused(where, exc, scrub) from None
    except TelegramError as exc:
        raise _refused(where, exc, scrub) from None


async def delete_message(
    bot: Bot, deletion: OutboundDeletion, chat_id: int | str, *, scrub: Scrub
) -> None:
    """``deleteMessage`` of a message the bot sent (a bot may delete its own messages for
    48 hours); ``RateLimitedError`` under flood control, ``DeliveryError`` when refused."""
    where = f"delete message {deletion.message_id} in chat {deletion.chat_id}"
    try:
        await bot.delete_message(chat_id=chat_id, message_id=int(deletion.message_id))
    except TelegramError as exc:
        raise _refused(where, exc, scrub) from None


async def send_draft_text(
    bot: Bot, chat_id: int | str, draft_id: int, part: RenderedPart, *, scrub: Scrub
) -> None:
    """Show ``part`` as draft ``draft_id`` in a private chat (Telegram refuses others)."""

    async def call(text: str, parse_mode: str | None) -> Any:
        return await bot.send_message_draft(
            chat_id=int(chat_id), draft_id=draft_id, text=text, parse_mode=parse_mode
        )

    try:
        await _with_plain_fallback(call, part)
    except TelegramError as exc:
        if "textdraft_peer_invalid" in exc.message.lower():
            raise DeliveryError(
                f"telegram shows drafts only in private chats, not in chat {chat_id}",
                hint="edit a message instead of drafting in groups and channels",
            ) from None
        raise _refused(f"show a draft in chat {chat_id}", exc, scrub) from None


async def _with_plain_fallback(
    call: Callable[[str, str | None], Awaitable[Any]], part: RenderedPart
) -> None:
    """``call`` with the part's HTML, and once more with its plain text when Telegram
    cannot parse the HTML."""
    if part.markup != "telegram_html":
        await call(part.text, None)
        return
    try:
        await call(part.text, ParseMode.HTML)
    except BadRequest as exc:
        if "parse entities" not in exc.message.lower():
            raise
        await call(part.plain, None)


def _refused(where: str, exc: TelegramError, scrub: Scrub) -> DeliveryError:
    """Telegram's refusal as clawbot's: ``RateLimitedError`` for flood control, a plain
    ``DeliveryError`` (its reason through ``scrub``, which masks the token) otherwise."""
    wait = flood_wait(exc)
    if wait is not None:
        return RateLimitedError(f"telegram asked to wait {wait:g} s to {where}", wait)
    reason = scrub(exc.message)
    if "message_too_long" in reason.lower():
        return DeliveryError(
            f"telegram could not {where}: the text is over its 4096-unit limit",
            hint="show the text up to the limit and send the rest as new messages",
        )
    return DeliveryError(f"telegram could not {where}: {reason}")
