"""What litellm's model info says about a scripted model while it is installed: whether it
sees images (``ScriptedModel(vision=True)``) and its price (``ScriptedModel(price=...)``),
registered with ``litellm.register_model`` as for any provider's model, so litellm's own
``supports_vision`` and cost calculator answer for it. A model with neither is not
registered: litellm then has no price for it (a registered model is priced, at 0 when no
price is given), as for any unknown model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROVIDER = "scripted"


@dataclass(frozen=True)
class ScriptedPrice:
    """Dollars per million tokens, as a price list gives them."""

    input_per_million: float
    output_per_million: float


def declare_model_info(
    litellm: Any, model_string: str, *, vision: bool, price: ScriptedPrice | None
) -> None:
    """Register what the model declares, or forget it when it declares nothing."""
    if not vision and price is None:
        forget_model_info(litellm, model_string)
        return
    info: dict[str, Any] = {"litellm_provider": PROVIDER, "mode": "chat"}
    if vision:
        info["supports_vision"] = True
    if price is not None:
        info["input_cost_per_token"] = price.input_per_million / 1e6
        info["output_cost_per_token"] = price.output_per_million / 1e6
    litellm.register_model({model_string: info}, persist_across_reloads=False)


def forget_model_info(litellm: Any, model_string: str) -> None:
    """Take the model out of litellm's model info. litellm has no call to unregister one:
    the entry is removed from ``litellm.model_cost`` and litellm's own invalidation of its
    lookups over that map is called (private; its model-info caches would otherwise go on
    answering with the price)."""
    if litellm.model_cost.pop(model_string, None) is not None:
        litellm.utils._invalidate_model_cost_lowercase_map()
