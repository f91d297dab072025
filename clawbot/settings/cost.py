"""Settings of what models may cost: budgets that refuse a model call before it is made
once what they cover has spent them (``clawbot.runtime.budgets``).

A budget is dollars or tokens, written as a person says it: ``$5``, ``5 usd``, ``0.50``
(dollars), ``200000 tokens``, ``200k tokens``, ``2M tokens``. A value that does not read
as one is refused at start, naming the setting."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import NoDecode

BudgetUnit = Literal["usd", "tokens"]
_BUDGET = re.compile(
    r"^\s*(?P<dollar>\$)?\s*(?P<amount>\d+(?:[.,]\d+)?)\s*(?P<scale>[kKmM])?\s*"
    r"(?P<unit>usd|dollars?|tokens?)?\s*$",
    re.IGNORECASE,
)
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}
BUDGET_FORMAT = "a budget such as $5, 2.50 usd, 200000 tokens or 200k tokens"


class Budget(BaseModel):
    """An amount of dollars or tokens that calls may spend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    amount: float = Field(gt=0)
    unit: BudgetUnit = "usd"

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not {BUDGET_FORMAT}")
        if isinstance(value, int | float):
            return {"amount": value, "unit": "usd"}
        if not isinstance(value, str):
            return value
        return parse_budget(value)

    def describe(self) -> str:
        """``$5.00`` or ``200,000 tokens``."""
        if self.unit == "tokens":
            return f"{self.amount:,.0f} tokens"
        return f"${self.amount:,.2f}"


def parse_budget(text: str) -> dict[str, Any]:
    """``"$5"`` -> 5 dollars, ``"200k tokens"`` -> 200,000 tokens; a ValueError saying
    what a budget looks like otherwise."""
    found = _BUDGET.match(text)
    if found is None:
        raise ValueError(f"{text.strip()!r} is not {BUDGET_FORMAT}")
    unit_word = (found["unit"] or "").lower()
    tokens = unit_word.startswith("token")
    if tokens and found["dollar"]:
        raise ValueError(f"{text.strip()!r} is both dollars and tokens: {BUDGET_FORMAT}")
    if found["scale"] and not tokens:
        raise ValueError(f"{text.strip()!r}: k and M are for tokens; {BUDGET_FORMAT}")
    amount = float(found["amount"].replace(",", ".")) * _SCALE[(found["scale"] or "").lower()]
    if amount <= 0:
        raise ValueError(f"{text.strip()!r} is no budget: it must be more than 0")
    return {"amount": amount, "unit": "tokens" if tokens else "usd"}


class BudgetPolicy(BaseModel):
    """An agent's own budgets (``[budget]`` in its TOML file): what its calls may spend in
    a UTC day (all its sessions), in one session of it, and in one of its turns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_day: Budget | None = None
    per_session: Budget | None = None
    per_turn: Budget | None = None


class CostSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    daily_budget_usd: float | None = Field(
        default=None,
        gt=0,
        description="dollars every model call of the bot together may spend in a UTC day; "
        "then new model calls are refused until the next day (none: no cap)",
    )
    budget_per_day: Annotated[Budget | None, NoDecode] = Field(
        default=None,
        description="what one conversation, its subagents included, may spend in a UTC day: "
        "$5 or 200k tokens (none: no limit)",
    )
    budget_per_session: Annotated[Budget | None, NoDecode] = Field(
        default=None,
        description="what one conversation, its subagents included, may spend in all "
        "(none: no limit)",
    )
    budget_per_turn: Annotated[Budget | None, NoDecode] = Field(
        default=None,
        description="what one turn's model calls may spend: stops a runaway tool loop "
        "(none: no limit)",
    )
