"""Slack buttons: a message's actions as a Block Kit ``actions`` block, and a press (a
``block_actions`` interaction) as the command it stands for, from the presser, in that channel.

Pressing a button is the same as the presser typing its command, so who may press it is
checked by the router like any command. With blocks Slack shows the blocks, not ``text``, so
the message's text goes in ``section`` blocks above the buttons and stays in ``text`` as the
notification fallback. The app needs Interactivity turned on (in HTTP mode its Request URL is
the events endpoint); Socket Mode delivers presses over the same connection. Once answered,
``chat.update`` rewrites the message with its text's sections and no actions block
(``adapters.slack.edits``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from clawbot.messages import Action, InboundMessage

log = logging.getLogger("adapters.slack")

CHANNEL = "slack"
ACTION_ID_PREFIX = "clawbot_action_"
ACTION_IDS = re.compile("^" + ACTION_ID_PREFIX)
"""What the adapter's bolt listener matches: only clawbot's own buttons."""
SECTION_CHARS = 3000
"""Slack's limit on a section block's text."""
MAX_VALUE_CHARS = 2000
"""Slack's limit on a button's value."""


def sections_for(text: str, *, markup: bool) -> list[dict[str, Any]]:
    """The text as section blocks (Slack caps each at 3000 characters)."""
    kind = "mrkdwn" if markup else "plain_text"
    return [
        {"type": "section", "text": {"type": kind, "text": text[start : start + SECTION_CHARS]}}
        for start in range(0, len(text), SECTION_CHARS)
    ]


def blocks_for(text: str, actions: tuple[Action, ...], *, markup: bool) -> list[dict[str, Any]]:
    """The text as section blocks, then one actions block with a button per action."""
    sections = sections_for(text, markup=markup)
    buttons = []
    for index, action in enumerate(actions):
        if len(action.command) > MAX_VALUE_CHARS:  # Slack refuses it; typing it still works
            log.warning("slack: left out a button whose command is too long to carry")
            continue
        buttons.append(
            {
                "type": "button",
                "text": {"type": "plain_text", "text": action.label[:75]},
                "action_id": f"{ACTION_ID_PREFIX}{index}",
                "value": action.command,
            }
        )
    if not buttons:  # an actions block without elements is invalid_blocks to Slack
        return sections
    return [*sections, {"type": "actions", "block_id": "clawbot_actions", "elements": buttons}]


def press_to_inbound(body: Any) -> InboundMessage | None:
    """The command a pressed clawbot button stands for; None (with a warning naming no
    content) for a payload that lacks what a command needs."""
    if not isinstance(body, Mapping):
        log.warning("slack: skipped a malformed button press (%s)", type(body).__name__)
        return None
    user, channel = body.get("user"), body.get("channel")
    actions = body.get("actions")
    user_id = user.get("id") if isinstance(user, Mapping) else None
    chat_id = channel.get("id") if isinstance(channel, Mapping) else None
    pressed = actions[0] if isinstance(actions, list) and actions else None
    command = pressed.get("value") if isinstance(pressed, Mapping) else None
    if not (
        isinstance(user_id, str)
        and isinstance(chat_id, str)
        and isinstance(command, str)
        and isinstance(pressed, Mapping)
    ):
        log.warning("slack: skipped a button press without a user, channel or value")
        return None
    # Unique per press, so deduplication never drops a second press of the same button.
    press_id = body.get("trigger_id") or pressed.get("action_ts")
    message = body.get("message")
    thread = message.get("thread_ts") if isinstance(message, Mapping) else None
    if isinstance(message, Mapping) and thread == message.get("ts"):
        thread = None  # the top-level message a thread hangs from
    name = user.get("name") if isinstance(user, Mapping) else None
    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        chat_type="dm" if chat_id.startswith("D") else "group",
        thread_id=thread if isinstance(thread, str) else None,
        sender_id=user_id,
        sender_name=name if isinstance(name, str) else "",
        text=command,
        message_id=f"action:{press_id}",
        mentioned=True,  # a button under the bot's message is addressed to the bot
    )
