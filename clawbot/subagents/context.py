"""The ``[Context: subagent_announce]`` blocks a parent's turn shows the model: rendered
from the payloads of the announces the turn answers, for that turn's requests only (the
runtime's ephemeral context), never written to the transcript."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from clawbot.errors import MalformedMetaError
from clawbot.messages import TranscriptEntry
from clawbot.runtime.plugins import TurnPlugin, TurnStart
from clawbot.subagents.notifications import task_notification, unreadable_notification
from clawbot.subagents.records import AnnouncePayload, headers_of, parse_meta, payloads_in

log = logging.getLogger("clawbot.subagents")


def announce_context(
    inputs: Sequence[TranscriptEntry], *, notifications: bool = False
) -> list[str]:
    """One block per report among a turn's input messages (merged ones and a peer
    exchange's batch included). An unreadable payload becomes a block saying so, never a
    failed turn. ``notifications``: the turn is a coordinator's, which gets
    ``<task-notification>`` XML instead."""
    blocks: list[str] = []
    for value in (value for meta in headers_of(inputs) for value in payloads_in(meta)):
        try:
            payload = parse_meta(AnnouncePayload, value, "announce payload")
        except MalformedMetaError as exc:
            log.warning("%s", exc)
            if notifications:
                blocks.append(unreadable_notification(exc.message))
                continue
            blocks.append(
                "[Context: subagent_announce]\n"
                f"A subagent finished, but its report cannot be read: {exc.message}.\n"
                "[/Context]"
            )
            continue
        blocks.append(task_notification(payload) if notifications else payload.render())
    return blocks


class AnnounceContext(TurnPlugin):
    """The announces a turn answers, shown to its model as ephemeral context blocks."""

    name = "subagent_announces"

    async def context(self, turn: TurnStart) -> list[str]:
        return announce_context(turn.inputs, notifications=turn.agent.coordinator)
