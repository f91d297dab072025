"""The scripted model's images, voice in and voice out, through the real litellm path
(``clawbot.testing`` installs these; see there).

- Vision: a scripted model that declares it (``ScriptedModel(vision=True)``) is registered in
  litellm's model info (``model_info.py``), so ``litellm.supports_vision`` says so, as for
  any provider's model; the image blocks a request carries reach the scripted handler
  through ``acompletion`` like everything else and are kept in its requests.
- Transcription and speech: litellm 1.102.4 has no custom-provider seam for
  ``atranscription`` or ``aspeech``: ``custom_provider_map`` serves completion, embedding
  and image generation only, and ``litellm.main.transcription`` and ``litellm.main.speech``
  (what the async calls run on a worker thread) look every provider up in the
  ``LlmProviders`` enum before they dispatch, failing on ``scripted``. So each is wrapped
  once, minimally: ``scripted/...`` models are answered here, every other model goes on to
  litellm's own function untouched. The async call itself (its executor, its response
  check, its call logging, its mapping of failures to litellm's exceptions) runs as for a
  real provider.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

PROVIDER = "scripted"
T = TypeVar("T")


@dataclass(frozen=True)
class SpeechRequest:
    """One ``aspeech`` request as the model received it."""

    model: str
    input: str
    voice: str | None
    response_format: str | None


@dataclass(frozen=True)
class TranscriptionRequest:
    """One ``atranscription`` request as the model received it."""

    model: str
    file_name: str
    audio: bytes
    mime_type: str


class Speaker(Protocol):
    async def speak(self, request: SpeechRequest) -> bytes: ...


class Transcriber(Protocol):
    def transcribe(self, request: TranscriptionRequest) -> str | Exception: ...


def scripted_audio(text: str) -> bytes:
    """What a scripted speech model says for ``text``: the same bytes every time, shaped as
    OGG/Opus begins (an Ogg page holding an ``OpusHead``), so it goes out as a voice note,
    followed by a digest of the text. Not playable: nothing here plays it."""
    page = b"OggS\x00\x02" + bytes(20) + b"\x01\x13"  # one segment of 19 bytes
    head = b"OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00"
    return page + head + hashlib.sha256(text.encode()).digest()


def install_speech(litellm: Any, find: Callable[[str], Speaker | None]) -> None:
    """Route speech of ``scripted/...`` models to the model ``find`` gives by name (once)."""
    import litellm.main as main

    original = main.speech
    if getattr(original, "scripted", False):
        return

    @functools.wraps(original)
    def speech(*args: Any, **kwargs: Any) -> Any:
        model = str(args[0] if args else kwargs.get("model", ""))
        if not model.startswith(f"{PROVIDER}/"):
            return original(*args, **kwargs)
        return Deferred(lambda: _speak(litellm, _found(litellm, find, model), model, kwargs))

    speech.scripted = True  # type: ignore[attr-defined]
    main.speech = speech


def install_transcription(litellm: Any, find: Callable[[str], Transcriber | None]) -> None:
    """Route transcriptions of ``scripted/...`` models to the model ``find`` gives (once)."""
    import litellm.main as main

    original = main.transcription
    if getattr(original, "scripted", False):
        return

    @functools.wraps(original)
    def transcription(model: str, file: Any, *args: Any, **kwargs: Any) -> Any:
        if not str(model).startswith(f"{PROVIDER}/"):
            return original(model, file, *args, **kwargs)
        if not kwargs.get("atranscription"):
            raise litellm.BadRequestError(
                message="the scripted model is async only: use litellm.atranscription",
                model=model,
                llm_provider=PROVIDER,
            )
        request = _transcription_request(model, file)
        return Deferred(lambda: _transcribe(_found(litellm, find, model), request))

    transcription.scripted = True  # type: ignore[attr-defined]
    main.transcription = transcription


def _found(litellm: Any, find: Callable[[str], T | None], model: str) -> T:
    found = find(model.split("/", 1)[-1])
    if found is None:
        raise litellm.NotFoundError(
            message=f"no scripted model named {model!r} is installed",
            model=model,
            llm_provider=PROVIDER,
        )
    return found


async def _speak(litellm: Any, model: Speaker, model_string: str, kwargs: dict[str, Any]) -> Any:
    import httpx
    from litellm.types.llms.openai import HttpxBinaryResponseContent

    request = SpeechRequest(
        model=model_string,
        input=str(kwargs.get("input", "")),
        voice=kwargs.get("voice"),
        response_format=kwargs.get("response_format"),
    )
    audio = await model.speak(request)
    return HttpxBinaryResponseContent(
        httpx.Response(200, content=audio, headers={"content-type": "audio/ogg"})
    )


async def _transcribe(model: Transcriber, request: TranscriptionRequest) -> Any:
    from litellm.types.utils import TranscriptionResponse

    heard = model.transcribe(request)
    if isinstance(heard, Exception):
        raise heard
    return TranscriptionResponse(text=heard)


def _transcription_request(model: str, file: Any) -> TranscriptionRequest:
    """What was sent, as the OpenAI SDK takes a file: ``(name, bytes[, type])``."""
    if isinstance(file, tuple):
        name, data = str(file[0]), bytes(file[1])
        mime = str(file[2]) if len(file) > 2 else "application/octet-stream"
    else:
        name, data, mime = "audio", bytes(file.read()), "application/octet-stream"
    return TranscriptionRequest(model=model, file_name=name, audio=data, mime_type=mime)


class Deferred(Coroutine[Any, Any, T]):
    """A coroutine that makes the real one (``start()``) only when it is first run, so
    dropping it unawaited leaves nothing behind to warn about. litellm runs a provider's
    function on a worker thread and awaits what it returns on the event loop, unless the
    call was cancelled in between (a stopped turn): then it drops it."""

    def __init__(self, start: Callable[[], Coroutine[Any, Any, T]]) -> None:
        self._start = start
        self._started: Coroutine[Any, Any, T] | None = None

    def _coroutine(self) -> Coroutine[Any, Any, T]:
        if self._started is None:
            self._started = self._start()
        return self._started

    def send(self, value: Any) -> Any:
        return self._coroutine().send(value)

    def throw(self, *args: Any) -> Any:
        return self._coroutine().throw(*args)

    def close(self) -> None:
        if self._started is not None:
            self._started.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self._coroutine().__await__()
