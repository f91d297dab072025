"""Voice notes and audio as text, through litellm's ``atranscription`` with the model the
operator chose (``CLAWBOT_TRANSCRIPTION_MODEL``). A provider's failure becomes one short
ProviderError the person is told; the turn goes on without the text."""

from __future__ import annotations

import logging
from typing import Any

from clawbot.errors import ProviderError
from clawbot.providers import litellm_module
from clawbot.runtime.metering import UsageMeter, response_cost

log = logging.getLogger("clawbot.media")


async def transcribe(
    model: str,
    name: str,
    mime: str,
    data: bytes,
    timeout: float,
    meter: UsageMeter | None = None,
) -> str:
    """The words of the audio file ``name`` (the call counted in ``meter``'s ledger)."""
    litellm = litellm_module()
    started = UsageMeter.started()
    try:
        response = await litellm.atranscription(
            model=model, file=(name, data, mime), timeout=timeout
        )
    except Exception as exc:
        if meter is not None:
            await meter.failed("transcription", model, started, exc)
        raise _failure(litellm, exc, model, name) from None
    if meter is not None:
        await meter.record(
            purpose="transcription", model=model, started=started, cost_usd=response_cost(response)
        )
    return str(getattr(response, "text", "") or "").strip()


def _failure(litellm: Any, exc: Exception, model: str, name: str) -> ProviderError:
    """The one short error the person is told for a failed transcription."""
    if isinstance(exc, litellm.AuthenticationError):
        return ProviderError(
            f"the speech-to-text model {model} rejected the API key",
            hint="check the key in the environment or .env",
        )
    # litellm maps each provider's failures to many classes
    log.warning("transcribing %s with %s failed: %s", name, model, exc)
    first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return ProviderError(f"the speech-to-text model {model} failed: {first}")
