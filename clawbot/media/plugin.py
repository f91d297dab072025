"""The media plug-in: what people send, made usable in the turn that answers it.

Before a turn's first model call (in ``context``, as the first plug-in, so memory recall
reads a voice note's words too; it adds no context block of its own):

- the voice notes, audio and documents of the messages it answers are taken in once
  (:mod:`clawbot.media.received`); what became of them is one more user entry of the turn,
  stored (``[Files received]``, ``meta["media"]``), so later turns read it too and a turn
  run again after a crash does not take them in twice;
- the images of its history are fetched (:mod:`clawbot.media.images`), for its requests only.

Then each model request shows the images where they were sent (``history``), and the person
hears, in one message, about what could not be used: a file over a limit or of a type not
taken, a download that failed or took too long, voice not set up or its provider failing,
and, once per conversation and model, a model that cannot see images.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from clawbot.channels.outbox import Outbox
from clawbot.lru import LRUCache
from clawbot.media.fetching import Fetcher
from clawbot.media.images import Shown, show_images
from clawbot.media.kinds import sort
from clawbot.media.received import Receiver
from clawbot.messages import Provenance, TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.metering import UsageMeter
from clawbot.runtime.plugins import TurnPlugin, TurnStart
from clawbot.runtime.transcripts import Attached
from clawbot.settings import Settings
from clawbot.store import Store

MEDIA_META = "media"
"""The meta key of the entry saying what became of a turn's files (the refs it took in)."""
RECEIVED_HEADER = "[Files received]"
BLIND_NOTICE = (
    "The model of this conversation ({model}) cannot see images, so it only knows the names "
    "of the images you send. Switch to one that can with /model."
)

log = logging.getLogger("clawbot.media")


class MediaIn(TurnPlugin):
    name = "media"

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        outbox: Outbox,
        meter: UsageMeter | None = None,
    ) -> None:
        self.settings = settings
        self.meter = meter  # counts transcriptions in the usage ledger
        self.store = store
        self.outbox = outbox
        self.fetcher = Fetcher(outbox, settings.media_download_timeout)
        self._shown: dict[str, Shown] = {}  # turn id -> what its requests show
        self._told_blind: LRUCache[tuple[str, str], bool] = LRUCache(settings.session_cache_size)

    async def context(self, turn: TurnStart) -> Sequence[str]:
        held = turn.transcript.attached()
        if held:
            await self._prepare(turn, held)
        return ()

    async def _prepare(self, turn: TurnStart, held: list[Attached]) -> None:
        notices: list[str] = []
        own = [a for a in held if a.turn_id == turn.turn_id]
        if own:
            notices += await self._take_in(turn, own)
        shown = await show_images(self.settings, self.fetcher, turn.model, turn.turn_id, held)
        if shown.messages:
            self._shown[turn.turn_id] = shown
        notices += shown.notices
        if shown.blind and self._told_blind.get((turn.session.key, turn.model)) is None:
            self._told_blind.put((turn.session.key, turn.model), True)
            notices.append(BLIND_NOTICE.format(model=turn.model))
        if notices:
            await self._tell(turn.session, notices)

    def history(self, turn: TurnStart, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        shown = self._shown.get(turn.turn_id)
        return messages if shown is None else shown.rewrite(messages)

    async def turn_ended(self, turn: TurnStart) -> None:
        self._shown.pop(turn.turn_id, None)

    async def _take_in(self, turn: TurnStart, own: list[Attached]) -> list[str]:
        """Take in the turn's voice notes, audio and documents, unless an earlier run of
        the turn did; the notices for the person."""
        files = [(b, s) for a in own for b in a.files if (s := sort(b)).kind != "image"]
        if not files or await self._taken_before(turn):
            return []
        context = turn.tool_context()
        receiver = Receiver(
            self.settings, self.fetcher, context.workspace, await context.reach(), self.meter
        )
        lines: list[str] = []
        notices: list[str] = []
        for block, sorted_as in files:
            taken = await receiver.take(block, sorted_as)
            lines.append(f"- {taken.line}")
            if taken.notice:
                notices.append(taken.notice)
        entry = TranscriptEntry(
            role="user",
            content=(TextBlock(text="\n".join([RECEIVED_HEADER, *lines])),),
            provenance=Provenance(channel=turn.session.channel, source="system"),
            meta={MEDIA_META: [block.ref for block, _ in files]},
            turn_id=turn.turn_id,
        )
        await self.store.transcripts.append(turn.session, [entry])
        turn.transcript.append([entry])
        return notices

    async def _taken_before(self, turn: TurnStart) -> bool:
        entries = await self.store.injections.turn(turn.session.key, turn.turn_id)
        return any(MEDIA_META in entry.meta for entry in entries)

    async def _tell(self, session: Session, notices: list[str]) -> None:
        notices = list(dict.fromkeys(notices))  # two voice notes: told once it is not set up
        text = (
            notices[0]
            if len(notices) == 1
            else "About what you sent:\n" + "\n".join(f"- {n}" for n in notices)
        )
        delivery = await self.outbox.deliver(session.notice(text))
        if delivery.status == "failed":
            log.warning("could not tell %s about its files: %s", session.key, delivery.error)
