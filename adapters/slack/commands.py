"""clawbot's Slack slash command: ``/clawbot status`` runs clawbot's ``/status``.

In the Slack client a message starting with ``/`` is a Slack slash command and never reaches
the bot as text (``/status`` is Slack's own), so clawbot registers one command of its own
(``CLAWBOT_SLACK_COMMAND``, default ``/clawbot``) whose text names the clawbot command:
``/clawbot status``, ``/clawbot model openai/gpt-4o``, ``/clawbot`` alone for ``/help``. It
becomes the same InboundMessage the text form would, so the router applies the same access
rules and answers through the outbox into the conversation it was typed in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from clawbot.messages import InboundMessage

log = logging.getLogger("adapters.slack")

CHANNEL = "slack"
DEFAULT_COMMAND = "/clawbot"
_COMMAND_NAME = re.compile(r"/[a-z0-9_\-]{1,31}")
"""Slack's rule: a slash, then lowercase letters, digits, ``-`` or ``_``; 32 characters at most."""


def command_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Slack slash command, or None if it can."""
    if _COMMAND_NAME.fullmatch(name):
        return None
    return (
        f"CLAWBOT_SLACK_COMMAND {name!r} is not a Slack slash command: it must start with '/' "
        "and hold at most 31 lowercase letters, digits, '-' or '_' (e.g. /clawbot)"
    )


def command_to_inbound(payload: Any) -> InboundMessage | None:
    """The clawbot command a slash-command payload asks for, as an InboundMessage; None (with
    a warning naming no content) for a payload that lacks what a command needs."""
    if not isinstance(payload, Mapping):
        log.warning("slack: skipped a malformed slash command (%s)", type(payload).__name__)
        return None
    fields = {key: payload.get(key) for key in ("channel_id", "user_id", "trigger_id")}
    missing = [key for key, value in fields.items() if not isinstance(value, str) or not value]
    if missing:
        log.warning("slack: skipped a slash command without %s", ", ".join(missing))
        return None
    raw = payload.get("text")
    words = (raw if isinstance(raw, str) else "").strip().lstrip("/")
    chat_id = str(fields["channel_id"])
    user_name = payload.get("user_name")
    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        chat_type="dm" if chat_id.startswith("D") else "group",
        sender_id=str(fields["user_id"]),
        sender_name=user_name if isinstance(user_name, str) else "",
        text="/" + (words or "help"),
        # trigger_id is unique per invocation: two runs of the same command are two messages.
        message_id=str(fields["trigger_id"]),
        mentioned=True,  # a command is addressed to the bot by its nature
    )
