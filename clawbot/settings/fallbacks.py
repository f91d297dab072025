"""Settings of model fallbacks: the models a call moves to when its own is down, and how
long a failed model rests before it is tried again (docs/fallbacks.md)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

MODEL_REF = re.compile(r"^[^/\s]+/\S+$")
"""A litellm model string as clawbot takes it: ``provider/model``."""


class FallbackSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    fallback_models: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="models a call moves to, in order, when its model is down (an outage, a "
        "timeout, a 429 after the retries, a rejected key, a spent quota); an agent's "
        "fallback_models replace this list",
    )
    fallback_cooldown: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="seconds a model that failed rests before it is tried again (doubled at "
        "each failure in a row, up to fallback_cooldown_max; longer when its provider said so)",
    )
    fallback_cooldown_max: float = Field(
        default=900.0,
        gt=0,
        le=86_400,
        description="the longest rest of a model that keeps failing, in seconds",
    )

    @field_validator("fallback_models", mode="before")
    @classmethod
    def _split_models(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(item.strip() for item in value.split(",") if item.strip())
        return value

    @field_validator("fallback_models", mode="after")
    @classmethod
    def _model_refs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [item for item in value if not MODEL_REF.match(item)]
        if bad:
            raise ValueError(
                f"{', '.join(map(repr, bad))}: write each model as provider/model, "
                "e.g. openai/gpt-4o-mini,anthropic/claude-sonnet-4-5"
            )
        return tuple(dict.fromkeys(value))
