"""What an operator chose at set-up, and who may talk to the bot, checked before anything is
written."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from clawbot.errors import ConfigError
from clawbot.settings import DmPolicy
from clawbot.setup.platforms import PLATFORMS, PlatformName

DM_POLICIES: dict[DmPolicy, str] = {
    "pairing": "a stranger gets a code; you let them in with `clawbot pairing approve`",
    "allowlist": "only the people you list now (and those you approve by pairing)",
    "open": "anyone who finds the bot",
    "disabled": "no direct messages at all",
}
"""Each DM policy in one line, in the order they are offered (the first is the default)."""


class OnboardAnswers(BaseModel):
    """Everything a first run writes. Secrets stay ``SecretStr``: no repr, log or error
    shows them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    provider_key: tuple[str, SecretStr] | None = None
    """The variable the model's provider reads (``OPENAI_API_KEY``) and its value; None
    keeps what is set (or the model needs no key)."""
    platform: PlatformName | None
    """None: no platform now (the console's first page allows it)."""
    tokens: dict[str, SecretStr] = Field(default_factory=dict)
    """The platform's tokens by settings field (``telegram_token``)."""
    dm_policy: DmPolicy = "pairing"
    allowed_senders: tuple[str, ...] = ()
    """``channel:id`` of the people always allowed, on this platform."""


class SenderError(ConfigError):
    """An allowed sender that is not an id of the platform."""

    hint = "give ids separated by commas, or leave it empty"


def parse_senders(platform: PlatformName, text: str) -> tuple[str, ...]:
    """``channel:id`` of each id in ``text`` (commas or spaces between them; a
    ``channel:`` prefix may be given), in order, each once."""
    setup = PLATFORMS[platform]
    senders: list[str] = []
    for item in text.replace(",", " ").split():
        channel, sep, ident = item.rpartition(":")
        if sep and channel != platform:
            raise SenderError(f"{item!r} is not a {setup.title} id: expected {setup.ids}")
        if not setup.id_pattern.fullmatch(ident):
            raise SenderError(f"{ident!r} is not a {setup.title} id: expected {setup.ids}")
        sender = f"{platform}:{ident}"
        if sender not in senders:
            senders.append(sender)
    return tuple(senders)


def access_problem(policy: DmPolicy, senders: tuple[str, ...]) -> str | None:
    """Why a choice would leave the bot unreachable, or None."""
    if policy == "allowlist" and not senders:
        return (
            "with allowlist and nobody listed, nobody can talk to the bot: list someone "
            "(yourself), or choose pairing"
        )
    return None
