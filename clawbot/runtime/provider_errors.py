"""How a provider's failure is read: whether it is worth a retry (and after how long),
whether it moves a call to a fallback model (and why, in words a person reads), and the
error a person is told when nothing answered."""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

from clawbot.clock import human_duration
from clawbot.errors import (
    ClawbotError,
    ContextLengthError,
    MissingCredentialsError,
    ProviderError,
)

MAX_WAIT = 30.0
"""The longest wait before a retry: a 429 asking for more goes to the next model at once."""
QUOTA_WORDS = ("quota", "credit balance", "billing")
"""A provider's words for a spent quota or credit (OpenAI's 429 ``insufficient_quota``,
Anthropic's "credit balance is too low", Gemini's "Quota exceeded"): waiting does not help."""


def wait_before_retry(backoff: float, failure: BaseException | None) -> float:
    asked = retry_after(failure) if failure is not None else None
    return min(max(backoff, asked or 0.0), MAX_WAIT)


def retry_after(exc: BaseException) -> float | None:
    """The seconds a provider asked the caller to wait (``retry-after`` or
    ``retry-after-ms`` in its answer's headers); None when it did not say."""
    try:
        headers = exc.response.headers  # type: ignore[attr-defined]
    except Exception:  # no response kept, or one without headers
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            continue  # an HTTP date: left to the backoff
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def quota_spent(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(word in text for word in QUOTA_WORDS)


def worth_retrying(exc: BaseException) -> bool:
    return not quota_spent(exc) and (retry_after(exc) or 0.0) <= MAX_WAIT


def outage_reason(litellm: Any, exc: BaseException) -> str | None:
    """Why a failure moves a call to the next model, as a person reads it; None when it
    does not (a request too long for the model, one the provider refused as malformed)."""
    if isinstance(exc, litellm.ContextWindowExceededError):
        return None
    if quota_spent(exc) and isinstance(
        exc, litellm.RateLimitError | litellm.BadRequestError | litellm.PermissionDeniedError
    ):
        return "has no quota left"
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return "rejected the API key"
    if isinstance(exc, transient(litellm)):
        return _what(exc)
    return None


def failure_error(litellm: Any, exc: BaseException, model: str) -> ClawbotError | None:
    """The error a person is told for a failed call; None for one left as it is."""
    if isinstance(exc, litellm.ContextWindowExceededError):
        return ContextLengthError(
            f"the request was longer than the input window of {model!r}: {short(exc)}"
        )
    if quota_spent(exc) and outage_reason(litellm, exc) is not None:
        return ProviderError(
            f"the provider of {model!r} says its quota is spent",
            hint="add credit with the provider, list another key (PROVIDER_API_KEYS) or set"
            " CLAWBOT_FALLBACK_MODELS",
        )
    if isinstance(exc, transient(litellm)):
        return ProviderError(describe_failure(exc, model))
    if isinstance(exc, litellm.AuthenticationError):
        return MissingCredentialsError(
            f"the provider of {model!r} rejected the API key",
            hint="check the key in the environment or .env",
        )
    if isinstance(exc, litellm.NotFoundError):
        return ProviderError(
            f"the provider does not know the model {model!r}",
            hint="pick another model with --model or CLAWBOT_MODEL",
        )
    if isinstance(exc, litellm.BadRequestError):
        return ProviderError(
            f"the provider refused the request for {model!r}: {short(exc)}",
            hint="try /new to start a fresh conversation",
        )
    return None


@functools.cache
def transient(litellm: ModuleType) -> tuple[type[Exception], ...]:
    """The failures worth retrying: timeouts, 429, 5xx and dropped connections. (An
    ``except`` clause evaluates this only when a call failed.)"""
    return (
        litellm.Timeout,
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIConnectionError,
        litellm.BadGatewayError,
    )


def short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _what(exc: BaseException) -> str:
    name = type(exc).__name__
    if "RateLimit" in name:
        asked = retry_after(exc)
        wait = f"; it asks to wait {human_duration(asked)}" if asked else ""
        return f"is rate limiting requests (429{wait})"
    if "Timeout" in name:
        return "did not answer in time"
    if "Connection" in name or "Connection error" in str(exc):
        # litellm reports a refused or dropped connection to an OpenAI-style API as an
        # InternalServerError whose text says "Connection error": no server answered.
        return "could not be reached (the connection failed: check the network and the base URL)"
    return "had a server error"


def describe_failure(exc: BaseException, model: str) -> str:
    return f"the model provider for {model!r} {_what(exc)}"
