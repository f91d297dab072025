"""The model and its key, checked with one short call through the runtime's own model
client (litellm), as every turn calls it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from pydantic import SecretStr

from clawbot.errors import CheckFailed, CredentialsRejected, MissingCredentialsError, ProviderError
from clawbot.providers import (
    KNOWN_PROVIDER_KEYS,
    key_list_variable,
    missing_credentials,
    provider_of,
)
from clawbot.runtime.llm import ModelClient

CHECK_PROMPT = "Reply with the word ok."
CHECK_TIMEOUT = 30.0


def key_names(model: str) -> tuple[str, ...]:
    """The variables one of which holds ``model``'s key (the first is the one written);
    () when it needs none, or litellm cannot tell and one is already set."""
    provider = provider_of(model)
    if provider in KNOWN_PROVIDER_KEYS:
        return KNOWN_PROVIDER_KEYS[provider]
    return tuple(missing_credentials(model))


def current_key(names: tuple[str, ...]) -> str | None:
    """The first of ``names`` set in the environment (a name, never its value)."""
    return next((name for name in names if os.environ.get(name)), None)


async def check_model(model: str, key: tuple[str, SecretStr] | None = None) -> None:
    """One call of at most one token to ``model``, with ``key`` (variable, value) in place of
    what the environment holds for the call's length.

    CredentialsRejected when the provider refuses the key, CheckFailed when the
    call fails otherwise (its message names the model, never the key).
    """
    client = ModelClient(timeout=CHECK_TIMEOUT, retries=0, backoff=0)
    with _key_in_environment(model, key):
        try:
            await client.complete(model, [{"role": "user", "content": CHECK_PROMPT}], max_tokens=1)
        except MissingCredentialsError:
            raise CredentialsRejected(f"the provider of {model!r} rejected the key") from None
        except ProviderError as exc:
            raise CheckFailed(
                f"the check of {model!r} failed: {exc.message}",
                hint="check the model's name and the provider's address, then try again",
            ) from None
        except Exception as exc:  # litellm has many more; their text may quote the key
            raise CheckFailed(
                f"the check of {model!r} failed ({type(exc).__name__})",
                hint="check the model's name and the provider's address, then try again",
            ) from None


@contextlib.contextmanager
def _key_in_environment(model: str, key: tuple[str, SecretStr] | None) -> Iterator[None]:
    """litellm reads keys from the environment; the key being checked is there for the
    call only, so a rejected one is not left behind, and a list of keys the environment
    holds (``OPENAI_API_KEYS``, which the model client would use instead) is away as long."""
    if key is None:
        yield
        return
    name, value = key
    changes = {name: value.get_secret_value(), key_list_variable(provider_of(model)): None}
    before = {variable: os.environ.get(variable) for variable in changes}
    try:
        _set(changes)
        yield
    finally:
        _set(before)


def _set(values: dict[str, str | None]) -> None:
    for variable, value in values.items():
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value
