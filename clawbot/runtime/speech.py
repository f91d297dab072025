"""Spoken replies: a conversation that asked for them (``/voice on``) gets each final reply
a second time, read aloud as a voice note, from the speech model ``CLAWBOT_TTS_MODEL``
through litellm's ``aspeech``.

The voice note follows the text, never replaces it: it is made once the reply reached the
chat (the ``reply_sent`` hook). When the speech model or the platform fails, the person is
told once, and not again until a voice note goes out; the text is the answer either way.
The choice is kept in the session's meta, so it outlives a restart.
"""

from __future__ import annotations

import logging

from clawbot.channels.file_kinds import HEAD_BYTES, extension_of, file_kind
from clawbot.channels.outbox import Outbox
from clawbot.channels.rendering import render
from clawbot.errors import ProviderError
from clawbot.lru import LRUCache
from clawbot.messages import INTERNAL_CHANNEL, OutboundFile
from clawbot.providers import litellm_module
from clawbot.routing.sessions import Session
from clawbot.runtime.metering import UsageMeter, response_cost
from clawbot.runtime.plugins import TurnPlugin
from clawbot.settings import Settings

log = logging.getLogger("clawbot.speech")

VOICE_META = "voice_replies"
"""The session meta key that holds ``True`` while the conversation's replies are spoken."""
MAX_SPOKEN_CHARS = 4000
"""What one voice note reads at most (OpenAI's speech models take 4,096 characters)."""
SPEECH_FORMAT = "opus"
"""Asked of the speech model: OGG/Opus, what the platforms play as a voice note."""


def speaks(session: Session) -> bool:
    """Whether ``session`` asked for its replies read aloud (``/voice on``)."""
    return session.meta.get(VOICE_META) is True


def spoken_text(reply: str) -> str:
    """The reply as it is read: its Markdown rendered plain, cut at ``MAX_SPOKEN_CHARS``
    after the last full sentence that fits."""
    text = render(reply, "plain").strip()
    if len(text) <= MAX_SPOKEN_CHARS:
        return text
    cut = text[:MAX_SPOKEN_CHARS]
    end = max(cut.rfind(". "), cut.rfind("\n"))
    return (cut[: end + 1] if end > MAX_SPOKEN_CHARS // 2 else cut).rstrip() + " …"


async def synthesize(
    model: str,
    text: str,
    *,
    voice: str,
    timeout: float,
    meter: UsageMeter | None = None,
    session: Session | None = None,
) -> bytes:
    """``text`` read aloud by ``model``; a ProviderError saying what failed. The call is
    counted in ``meter``'s ledger as ``session``'s."""
    litellm = litellm_module()
    started = UsageMeter.started()
    try:
        response = await litellm.aspeech(
            model=model, input=text, voice=voice, response_format=SPEECH_FORMAT, timeout=timeout
        )
        audio = response.content
    except Exception as exc:  # litellm maps every provider's failure to its own types
        if meter is not None:
            await meter.failed("speech", model, started, exc, session=session)
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise ProviderError(f"the speech model {model!r} failed: {first}") from None
    if meter is not None:
        await meter.record(
            purpose="speech",
            model=model,
            started=started,
            cost_usd=response_cost(response),
            session=session,
        )
    if not isinstance(audio, bytes) or not audio:
        raise ProviderError(f"the speech model {model!r} returned no audio")
    return audio


class VoiceReplies(TurnPlugin):
    """Reads a reply aloud once it reached the chat, where the conversation asked for it.
    Installed only with a speech model set: without one no turn pays for the hook."""

    name = "voice"

    def __init__(self, settings: Settings, outbox: Outbox, meter: UsageMeter | None = None) -> None:
        self.settings = settings
        self.outbox = outbox
        self.meter = meter
        self._told: LRUCache[str, bool] = LRUCache(4096)
        """Conversations told voice notes fail, not told again until one goes out."""

    async def reply_sent(self, session: Session, reply: str) -> None:
        model = self.settings.tts_model
        if model is None or not speaks(session) or session.channel == INTERNAL_CHANNEL:
            return
        text = spoken_text(reply)
        if not text:
            return
        try:
            audio = await synthesize(
                model,
                text,
                voice=self.settings.tts_voice,
                timeout=self.settings.provider_timeout,
                meter=self.meter,
                session=session,
            )
        except ProviderError as exc:
            await self._failed(session, exc.message)
            return
        kind, mime_type = file_kind(audio[:HEAD_BYTES], "reply")
        delivery = await self.outbox.send_file(
            OutboundFile(
                channel=session.channel,
                chat_id=session.chat_id,
                thread_id=session.thread_id,
                session_key=session.key,
                deliver=session.deliver,
                name=f"reply{extension_of(mime_type)}",
                data=audio,
                kind="voice" if kind in ("voice", "audio") else "document",
                mime_type=mime_type,
            )
        )
        if delivery.status == "failed":
            await self._failed(session, f"the chat refused it: {delivery.error}")
        elif delivery.status == "sent":
            self._told.pop(session.key)

    async def _failed(self, session: Session, reason: str) -> None:
        log.warning("no voice note for %s: %s", session.key, reason)
        if self._told.get(session.key):
            return
        self._told.put(session.key, True)
        await self.outbox.deliver(
            session.notice(
                f"The voice note of this reply failed ({reason}). The text above is the "
                "whole reply; I will not say this again until voice notes work."
            )
        )
