"""Voice notes and audio as text, through litellm's ``atranscription`` with the model the
operator chose (``CLAWBOT_TRANSCRIPTION_MODEL``). A provider's failure becomes one short
ProviderError the person is told; the turn goes on without the text."""

from __future__ import annotations

import logging

from clawbot.errors import ProviderError
from clawbot.providers import litellm_module

log = logging.getLogger("clawbot.media")


async def transcribe(model: str, name: str, mime: str, data: bytes, timeout: float) -> str:
    """The words of the audio file ``name``."""
    litellm = litellm_module()
    try:
        response = await litellm.atranscription(
            model=model, file=(name, data, mime), timeout=timeout
        )
    except litellm.AuthenticationError:
        raise ProviderError(
            f"the speech-to-text model {model} rejected the API key",
            hint="check the key in the environment or .env",
        ) from None
    except Exception as exc:  # litellm maps each provider's failures to many classes
        log.warning("transcribing %s with %s failed: %s", name, model, exc)
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ProviderError(f"the speech-to-text model {model} failed: {first}") from None
    return str(getattr(response, "text", "") or "").strip()
