"""Several keys of one provider (``OPENAI_API_KEYS=a,b``; the scripted provider's are
``SCRIPTED_API_KEYS``) take turns: a 429 or a spent quota on one moves the call to the
next, and no key's value reaches a log line, an error or a repr."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from clawbot.errors import ProviderError
from clawbot.providers import missing_credentials
from clawbot.redaction import REDACTED, SecretRedactor
from clawbot.runtime.llm import ModelClient
from clawbot.testing import ScriptedFailure, ScriptedModel

ASK = [{"role": "user", "content": "hi"}]
FIRST, SECOND = "key-first-1111", "key-second-2222"


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModel]:
    monkeypatch.setenv("SCRIPTED_API_KEYS", f"{FIRST}, {SECOND}")
    with ScriptedModel(name="keyed").installed() as scripted:
        yield scripted


def keys_used(model: ScriptedModel) -> list[str | None]:
    return [request.api_key for request in model.requests]


@pytest.mark.parametrize("failure", [ScriptedFailure("rate_limit"), ScriptedFailure("quota")])
async def test_a_429_or_a_spent_quota_on_one_key_moves_the_call_to_the_next(
    model: ScriptedModel, failure: ScriptedFailure
) -> None:
    model.key_failures = {FIRST: failure}
    model.add("Hello.")

    reply = await ModelClient(retries=0).complete(model.model_string, ASK)

    assert reply.text == "Hello."
    assert keys_used(model) == [FIRST, SECOND]


async def test_the_next_call_starts_with_the_key_that_worked(model: ScriptedModel) -> None:
    client = ModelClient(retries=0)
    model.key_failures = {FIRST: ScriptedFailure("rate_limit")}
    await client.complete(model.model_string, ASK)
    model.key_failures = {}

    await client.complete(model.model_string, ASK)

    assert keys_used(model) == [FIRST, SECOND, SECOND]


async def test_an_outage_is_not_blamed_on_the_key(model: ScriptedModel) -> None:
    model.add(ScriptedFailure("server_error"), "Hello.")

    await ModelClient(retries=1, backoff=0).complete(model.model_string, ASK)

    assert keys_used(model) == [FIRST, FIRST]


async def test_when_every_key_is_refused_the_call_goes_to_the_fallback(
    model: ScriptedModel,
) -> None:
    model.key_failures = {
        FIRST: ScriptedFailure("quota"),
        SECOND: ScriptedFailure("quota"),
    }
    with ScriptedModel(name="backup").installed() as backup:
        reply = await ModelClient(retries=0).complete(
            model.model_string, ASK, fallbacks=[backup.model_string]
        )

    assert reply.model == backup.model_string
    assert keys_used(model) == [FIRST, SECOND]


async def test_no_key_reaches_a_log_line_an_error_or_a_repr(
    model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    model.key_failures = {FIRST: ScriptedFailure("quota"), SECOND: ScriptedFailure("quota")}
    client = ModelClient(retries=0)
    caplog.set_level(logging.DEBUG)

    with pytest.raises(ProviderError) as failed:
        await client.complete(model.model_string, ASK)

    ring = client.keys.ring(model.model_string)
    assert ring is not None
    shown = "\n".join([caplog.text, str(failed.value), repr(ring), repr(ring.current())])
    assert "scripted key 1 of 2 was refused (its quota is spent)" in caplog.text
    assert FIRST not in shown and SECOND not in shown
    assert "quota is spent" in str(failed.value)


def test_a_provider_with_a_key_list_needs_no_single_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEYS", "a-key-111111,b-key-222222")

    assert missing_credentials("anthropic/claude-3-5-sonnet-20241022") == []


def test_each_key_of_a_list_is_masked_on_its_own() -> None:
    redactor = SecretRedactor()
    redactor.add_from_environment({"OPENAI_API_KEYS": f"{FIRST},{SECOND}"})

    assert redactor.redact(f"the provider refused {SECOND}") == f"the provider refused {REDACTED}"
