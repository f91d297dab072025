"""Images in a turn's model requests: the transcript holds a reference to each image a
person sent; before the turn's first model call the images of the messages the turn answers,
and the latest ``images_per_request`` of earlier ones in its history, are downloaded (again),
and each request shows them as image blocks after the message that brought them. The bytes
live for the turn only.

A model without vision (litellm's model info) is shown a short note instead, and so is an
image that can no longer be fetched (expired, deleted) or is not an image at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clawbot.errors import ClawbotError
from clawbot.media.fetching import Fetcher
from clawbot.media.kinds import sort
from clawbot.media.vision import image_part, image_type, sees_images
from clawbot.messages import AttachmentBlock
from clawbot.runtime.transcripts import Attached
from clawbot.settings import Settings

Part = dict[str, Any]


@dataclass
class Shown:
    """What a turn's requests show in place of the messages that brought images: the
    message as the transcript holds it (held, so its identity stays its own) and its form
    with the images; and what the person should hear about the turn's own images."""

    messages: dict[int, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    blind: bool = False
    """Some image of this turn was not shown because the model has no vision."""

    def rewrite(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.messages:
            return history
        out = []
        for message in history:
            found = self.messages.get(id(message))
            out.append(found[1] if found is not None and found[0] is message else message)
        return out


async def show_images(
    settings: Settings, fetcher: Fetcher, model: str, turn_id: str, held: Sequence[Attached]
) -> Shown:
    """The images of the held history as ``model``'s requests show them."""
    images = [(a, block) for a in held for block in a.files if sort(block).kind == "image"]
    shown = Shown()
    if not images:
        return shown
    count = settings.images_per_request
    earlier = [(a, block) for a, block in images if a.turn_id != turn_id]
    latest = [(a, block) for a, block in images if a.turn_id == turn_id]
    latest += earlier[-count:] if count else []
    sees = sees_images(model, settings.vision_models)
    fetched: dict[int, Part] = {}
    if sees and latest:
        parts = await asyncio.gather(*(_fetched(settings, fetcher, block) for _, block in latest))
        fetched = {id(block): part for (_, block), part in zip(latest, parts, strict=True)}
    for held_message, block in images:
        own = held_message.turn_id == turn_id
        if not sees:
            part = _note(f"{block.name}: not shown, the model {model} cannot see images")
            shown.blind = shown.blind or own
        elif id(block) in fetched:
            part = fetched[id(block)]
            problem = part.get("problem")
            if problem:
                if own:
                    shown.notices.append(f"I could not show the model {block.name}: {problem}.")
                part = _note(f"{block.name} is no longer available: {problem}")
        else:
            part = _note(f"{block.name}: an earlier image, not shown again")
        _add(shown, held_message.message, part)
    return shown


async def _fetched(settings: Settings, fetcher: Fetcher, block: AttachmentBlock) -> Part:
    """The image part, or ``{"problem": ...}`` saying why there is none."""
    try:
        data = await fetcher.fetch(block, settings.image_max_bytes, "CLAWBOT_IMAGE_MAX_BYTES")
    except ClawbotError as exc:
        return {"problem": exc.message}
    mime = image_type(data)
    if mime is None:
        return {"problem": "the file is not a JPEG, PNG, GIF or WebP image"}
    return image_part(mime, data)


def _note(text: str) -> Part:
    return {"type": "text", "text": f"[{text}]"}


def _add(shown: Shown, message: dict[str, Any], part: Part) -> None:
    found = shown.messages.get(id(message))
    if found is None:
        form: dict[str, Any] = {
            "role": message["role"],
            "content": [{"type": "text", "text": message["content"]}],
        }
        shown.messages[id(message)] = found = (message, form)
    found[1]["content"].append(part)
