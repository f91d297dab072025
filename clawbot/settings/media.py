"""Settings of what people send the bot: images, voice and files (docs/media.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode


class MediaSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    vision_models: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="models that see images though litellm's model information does not say "
        "so (a local or new model), as litellm model strings; a * matches any characters, "
        "e.g. ollama/llava*,openai/my-finetune",
    )

    @field_validator("vision_models", mode="before")
    @classmethod
    def _split_vision_models(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value
