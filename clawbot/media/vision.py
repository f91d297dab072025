"""Images for vision models: whether a model sees them (litellm's model info, offline), and
an image as the OpenAI-style content block litellm passes to every provider."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from clawbot.providers import litellm_module

_SIGNATURES = (
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sees_images(model: str, vision_models: Sequence[str] = ()) -> bool:
    """Whether ``model`` takes images: named in ``vision_models`` (the operator's
    ``CLAWBOT_VISION_MODELS``, for a model litellm does not know), else as litellm's model
    info says; False for a model neither knows (a provider refuses an image the model
    cannot take, failing the whole turn)."""
    if any(fnmatchcase(model, pattern) for pattern in vision_models):
        return True
    try:
        return bool(litellm_module().supports_vision(model=model))
    except Exception:  # litellm raises for a model it cannot map
        return False


def image_type(data: bytes) -> str | None:
    """The format the bytes say they are (JPEG, PNG, GIF, WebP), None for anything else: a
    provider refuses a broken image with an error that would fail every turn showing it."""
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_part(mime: str, data: bytes) -> dict[str, Any]:
    """An image as a request's content part: a data URL, so the provider never fetches
    anything (the platform's URL may need the bot's token, or expire)."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}
