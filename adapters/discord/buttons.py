"""Discord buttons: a message's actions as message components (a row of buttons whose
``custom_id`` is the command), and a press (a component interaction) as the command it stands
for, from the presser.

Pressing a button is the same as the presser typing its command, so who may press it is
checked by the router like any command. Presses are taken from the gateway's
INTERACTION_CREATE (``Client.on_interaction``) rather than from a stored ``View``: a stored
view lives in one process only, while a button must keep working after a restart. Discord caps
a ``custom_id`` at 100 characters; an action whose command is longer gets no button (its
command is in the message text anyway). The bot needs no extra permission or intent.

Once answered, the message is edited through REST (``PATCH /channels/{id}/messages/{id}``,
no components; ``adapters.discord.edits``): a press was acknowledged at once as
DEFERRED_UPDATE_MESSAGE (type 6, "the message will be edited"), since the answer is known
only after the command ran, and a typed ``/approve`` has no interaction to answer. An answer
for the presser alone (a refusal, ``OutboundMessage.private_to``) is the interaction's
ephemeral follow-up message (flags 64), which only they see.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp
import discord

from clawbot.messages import Action, ChatType, InboundMessage, OutboundMessage

log = logging.getLogger("adapters.discord")

CHANNEL = "discord"
MAX_CUSTOM_ID = 100
MAX_LABEL = 80
BUTTONS_PER_ROW = 5
MAX_BUTTONS = 25


def view_for(actions: tuple[Action, ...]) -> discord.ui.View | None:
    """A view holding one button per action (Discord lays out five to a row); None when no
    command fits. Call only with a running event loop (discord.py's views need one)."""
    fitting = [a for a in actions if 0 < len(a.command) <= MAX_CUSTOM_ID][:MAX_BUTTONS]
    if len(fitting) < len(actions):
        log.warning("discord: %d action(s) got no button", len(actions) - len(fitting))
    if not fitting:
        return None
    view = discord.ui.View(timeout=None)
    for index, action in enumerate(fitting):
        view.add_item(
            discord.ui.Button(
                label=action.label[:MAX_LABEL],
                custom_id=action.command,
                style=discord.ButtonStyle.secondary,
                row=index // BUTTONS_PER_ROW,
            )
        )
    return view


def pressed_command(interaction: discord.Interaction) -> str | None:
    """The command of a clawbot button this interaction pressed; None for anything else."""
    if interaction.type is not discord.InteractionType.component:
        return None
    data: Mapping[str, Any] = interaction.data or {}
    custom_id = data.get("custom_id")
    if data.get("component_type") != discord.ComponentType.button.value:
        return None
    if not isinstance(custom_id, str) or not custom_id.startswith("/"):
        return None
    return custom_id


def press_to_inbound(
    interaction: discord.Interaction,
    command: str,
    *,
    chat_type: ChatType,
    chat_id: str,
    thread_id: str | None,
) -> InboundMessage | None:
    """The presser's command in the chat the button is in; None for a press by a bot."""
    user = interaction.user
    if user is None or user.bot:
        return None
    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        chat_type=chat_type,
        thread_id=thread_id,
        sender_id=str(user.id),
        sender_name=user.display_name,
        text=command,
        # Unique per press, so deduplication never drops a second press of the same button.
        message_id=f"interaction:{interaction.id}",
        mentioned=True,  # a button under the bot's message is addressed to the bot
    )


class PressReplies:
    """The presses being handled, by the id of the message each became
    (``interaction:<id>``), so an answer for the presser alone can follow their press."""

    def __init__(self) -> None:
        self._open: dict[str, discord.Interaction] = {}

    @contextlib.contextmanager
    def handling(self, inbound: InboundMessage, interaction: discord.Interaction) -> Iterator[None]:
        key = inbound.message_id or ""
        self._open[key] = interaction
        try:
            yield
        finally:
            self._open.pop(key, None)

    async def answered_privately(self, message: OutboundMessage) -> bool:
        """Show ``message`` to the presser alone (an ephemeral follow-up of their press) when
        it is private and answers a press being handled; False to post it in the chat."""
        interaction = self._open.get(message.reply_to_message_id or "")
        if message.private_to is None or interaction is None or len(message.text) > 2000:
            return False
        try:
            await interaction.followup.send(
                content=message.text,
                ephemeral=True,
                allowed_mentions=discord.AllowedMentions.none(),
            )
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning(
                "discord: could not answer a button press privately (%s)", type(exc).__name__
            )
            return False
        return True
