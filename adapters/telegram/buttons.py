"""Telegram buttons: a message's actions as an inline keyboard, and a press (a callback query)
as the command it stands for, from the presser, in the chat the button is in.

Pressing a button is the same as the presser typing its command, so who may press it is
checked by the router like any command. Telegram caps ``callback_data`` at 64 bytes; an action
whose command is longer gets no button (its command is in the message text anyway). Once
answered, the message is rewritten with ``editMessageText`` (``adapters.telegram.edits``),
which drops the keyboard when it is given no ``reply_markup``.

A press is answered (``answerCallbackQuery``: the button stops spinning) once its command was
handled, and only once: with an alert shown to the presser alone when the command's answer is
for them only (a refusal, ``OutboundMessage.private_to``), else plainly.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from telegram.error import TelegramError

from clawbot.messages import Action, ChatType, InboundMessage, OutboundMessage

log = logging.getLogger("adapters.telegram")

CHANNEL = "telegram"
MAX_CALLBACK_DATA_BYTES = 64
MAX_ALERT_CHARS = 200
"""Telegram's limit on the text of a callback query's answer; a longer private answer is
posted in the chat instead."""
_CHAT_TYPES: dict[str, ChatType] = {"private": "dm", "channel": "channel"}


def keyboard(actions: tuple[Action, ...]) -> InlineKeyboardMarkup | None:
    """One button per row (labels stay readable on a phone); None when nothing fits."""
    rows = [
        [InlineKeyboardButton(action.label, callback_data=action.command)]
        for action in actions
        if _fits(action)
    ]
    return InlineKeyboardMarkup(rows) if rows else None


def _fits(action: Action) -> bool:
    if len(action.command.encode()) <= MAX_CALLBACK_DATA_BYTES:
        return True
    log.warning(
        "telegram: no button for %r: its command is over %d bytes",
        action.label,
        MAX_CALLBACK_DATA_BYTES,
    )
    return False


def press_to_inbound(query: CallbackQuery, *, bot_id: int) -> InboundMessage | None:
    """The command a pressed button stands for; None for a press that carries none, comes
    from a bot, or sits on a message Telegram no longer shows us."""
    message = query.message
    data = query.data
    user = query.from_user
    if not data or not isinstance(message, Message) or user.is_bot or user.id == bot_id:
        return None
    thread_id: str | None = None
    if message.is_topic_message and message.message_thread_id is not None:
        thread_id = str(message.message_thread_id)
    return InboundMessage(
        channel=CHANNEL,
        chat_id=str(message.chat.id),
        chat_type=_CHAT_TYPES.get(message.chat.type, "group"),
        thread_id=thread_id,
        sender_id=str(user.id),
        sender_name=user.full_name,
        text=data,
        # Unique per press, so deduplication never drops a second press of the same button.
        message_id=f"callback:{query.id}",
        mentioned=True,  # a button under the bot's message is addressed to the bot
    )


class PressAnswers:
    """The presses being handled, by the id of the message each became (``callback:<id>``),
    so the command's answer can be the press's own."""

    def __init__(self, scrub: Callable[[str], str]) -> None:
        self._open: dict[str, str] = {}
        self._scrub = scrub

    @contextlib.asynccontextmanager
    async def handling(self, bot: Bot, query: CallbackQuery) -> AsyncIterator[None]:
        """While the press's command is handled; then the press is answered plainly, unless
        a private answer did it."""
        key = f"callback:{query.id}"
        self._open[key] = query.id
        try:
            yield
        finally:
            if self._open.pop(key, None) is not None:
                await self._answer(bot, query.id)

    async def answered_privately(self, bot: Bot, message: OutboundMessage) -> bool:
        """Show ``message`` to the presser alone, as the answer to their press, when it is
        private and answers a press being handled; False to post it in the chat instead."""
        key = message.reply_to_message_id
        if message.private_to is None or key is None or len(message.text) > MAX_ALERT_CHARS:
            return False
        query_id = self._open.pop(key, None)
        return query_id is not None and await self._answer(bot, query_id, message.text)

    async def _answer(self, bot: Bot, query_id: str, text: str | None = None) -> bool:
        try:
            await bot.answer_callback_query(query_id, text=text, show_alert=text is not None)
        except TelegramError as exc:  # a redelivered press was answered already
            log.info("telegram: answering a button press failed: %s", self._scrub(str(exc)))
            return False
        return True
