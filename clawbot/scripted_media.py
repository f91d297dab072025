"""The scripted model's images and voice, through the real litellm path (``clawbot.testing``
installs these; see there).

- Vision: a scripted model that declares it (``ScriptedModel(vision=True)``) is registered in
  litellm's model info with ``litellm.register_model``, so ``litellm.supports_vision`` says
  so, as for any provider's model; the image blocks a request carries reach the scripted
  handler through ``acompletion`` like everything else and are kept in its requests.
- Transcription: litellm 1.102.4 has no custom-provider seam for ``atranscription``:
  ``custom_provider_map`` serves completion, embedding and image generation only, and
  ``litellm.main.transcription`` looks every provider up in the ``LlmProviders`` enum
  before it dispatches. So ``litellm.main.transcription`` (the function ``atranscription``
  runs) is wrapped once: ``scripted/...`` models are answered here, every other model goes
  to litellm's own function unchanged. ``atranscription`` itself, its executor, its
  response check and its exception mapping all run as for a real provider.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROVIDER = "scripted"


@dataclass(frozen=True)
class TranscriptionRequest:
    """One transcription as the scripted model received it."""

    model: str
    file_name: str
    audio: bytes
    mime_type: str


Answer = Callable[[str, TranscriptionRequest], Any]
"""Finds the scripted model's answer to a transcription: its text, or a failure to raise."""


def declare_vision(litellm: Any, model_string: str, vision: bool) -> None:
    """Say in litellm's model info whether ``model_string`` sees images (only a model that
    does is registered: a registered model is priced, at 0, where an unknown one is not)."""
    if vision:
        litellm.register_model(
            {model_string: {"litellm_provider": PROVIDER, "mode": "chat", "supports_vision": True}},
            persist_across_reloads=False,
        )
    else:
        forget_vision(litellm, model_string)


def forget_vision(litellm: Any, model_string: str) -> None:
    litellm.model_cost.pop(model_string, None)


def install_transcription(litellm: Any, answer: Answer) -> None:
    """Route transcriptions of ``scripted/...`` models to ``answer`` (once)."""
    import litellm.main as main

    original = main.transcription
    if getattr(original, "_scripted", False):
        return

    def transcription(model: str, file: Any, *args: Any, **kwargs: Any) -> Any:
        if not str(model).startswith(f"{PROVIDER}/"):
            return original(model, file, *args, **kwargs)
        request = _request(model, file)
        if kwargs.get("atranscription"):
            return _answered(litellm, model, request, answer)
        raise litellm.BadRequestError(
            message="the scripted model is async only: use litellm.atranscription",
            model=model,
            llm_provider=PROVIDER,
        )

    transcription._scripted = True  # type: ignore[attr-defined]
    main.transcription = transcription


async def _answered(litellm: Any, model: str, request: TranscriptionRequest, answer: Answer) -> Any:
    from litellm.types.utils import TranscriptionResponse

    found = answer(model.split("/", 1)[-1], request)
    if isinstance(found, BaseException):
        raise found
    return TranscriptionResponse(text=str(found))


def _request(model: str, file: Any) -> TranscriptionRequest:
    """What was sent, as the OpenAI SDK takes a file: ``(name, bytes[, type])``."""
    if isinstance(file, tuple):
        name, data = str(file[0]), bytes(file[1])
        mime = str(file[2]) if len(file) > 2 else "application/octet-stream"
    else:
        name, data, mime = "audio", bytes(file.read()), "application/octet-stream"
    return TranscriptionRequest(model=model, file_name=name, audio=data, mime_type=mime)
