"""The end of a streamed model call (clawbot/runtime/litellm_stream.py): litellm's work
there that nothing uses is skipped, and everything something uses is kept."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from clawbot.providers import litellm_module
from clawbot.runtime import litellm_stream
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.text_stream import streaming_to
from clawbot.testing import ScriptedModel, ScriptedPrice, ScriptedUsage, call

ASK = [{"role": "user", "content": "hi"}]


class Sink:
    def on_text(self, text: str) -> None:
        pass

    def on_call_end(self, tool_calls: bool) -> None:
        pass


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How often litellm rebuilt a response from its chunks, deep-copied one (for its
    cache) and dispatched its success logging, while the test ran."""
    litellm = litellm_module()
    from litellm.litellm_core_utils.litellm_logging import Logging
    from litellm.types.utils import ModelResponse

    counts = {"built": 0, "deep copies": 0, "success logging": 0}
    build = litellm.stream_chunk_builder
    copy = ModelResponse.model_copy
    dispatch = Logging.dispatch_success_handlers

    def built(*args: Any, **kwargs: Any) -> Any:
        counts["built"] += 1
        return build(*args, **kwargs)

    def copied(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["deep copies"] += bool(kwargs.get("deep"))
        return copy(self, *args, **kwargs)

    async def dispatched(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["success logging"] += 1
        return await dispatch(self, *args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", built)
    monkeypatch.setattr(ModelResponse, "model_copy", copied)
    monkeypatch.setattr(Logging, "dispatch_success_handlers", dispatched)
    yield counts


async def stream_once(model: ScriptedModel) -> Any:
    with streaming_to(Sink()):
        reply = await ModelClient().complete(model.model_string, ASK)
    for _ in range(20):  # litellm's tasks scheduled at the end of the stream get to run
        await asyncio.sleep(0)
    return reply


async def test_a_streamed_call_has_litellm_build_its_whole_response_once(
    scripted: ScriptedModel, counted: dict[str, int]
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=12, completion_tokens=3, cost_usd=0.002)
    scripted.add("Hello there.")

    reply = await stream_once(scripted)

    assert counted["built"] == 1  # for the usage chunk, with its cost; not again at the end
    assert reply.text == "Hello there."
    assert reply.meta == {"usage": {"prompt_tokens": 12, "completion_tokens": 3}, "cost_usd": 0.002}


async def test_a_streamed_call_without_the_providers_token_counts_has_litellm_count_them(
    scripted: ScriptedModel, counted: dict[str, int]
) -> None:
    scripted.usage = None  # the provider's last chunk says 0 tokens: litellm counts them
    scripted.add("Hello there.")

    reply = await stream_once(scripted)

    assert counted["built"] == 1  # litellm's own build, once, for its count
    assert reply.meta["usage"]["prompt_tokens"] > 0
    assert reply.meta["usage"]["completion_tokens"] > 0


@pytest.fixture
def priced() -> Iterator[ScriptedModel]:
    """A scripted model with a price in litellm's map (1 and 2 dollars a million tokens)."""
    model = ScriptedModel(name="priced", price=ScriptedPrice(1.0, 2.0))
    with model.installed():
        yield model


async def test_a_streamed_call_costs_what_the_same_call_in_one_piece_costs(
    priced: ScriptedModel,
) -> None:
    priced.usage = ScriptedUsage(prompt_tokens=100, completion_tokens=4)
    priced.add("Fine, thanks.", "Fine, thanks.")

    whole = await ModelClient().complete(priced.model_string, ASK)
    streamed = await stream_once(priced)

    assert streamed.meta == whole.meta
    assert streamed.meta["cost_usd"] == pytest.approx(100 * 1e-6 + 4 * 2e-6)


async def test_a_streamed_tool_call_keeps_the_providers_usage_and_its_price(
    priced: ScriptedModel,
) -> None:
    priced.usage = ScriptedUsage(prompt_tokens=50, completion_tokens=10)
    priced.add(call("remember", text="the cat is called Tom"))

    reply = await stream_once(priced)

    assert [c.name for c in reply.tool_calls] == ["remember"]
    assert reply.meta["usage"] == {"prompt_tokens": 50, "completion_tokens": 10}
    assert reply.meta["cost_usd"] == pytest.approx(50 * 1e-6 + 10 * 2e-6)


async def test_without_a_cache_or_a_callback_a_streamed_call_leaves_litellm_no_copy_or_logging(
    scripted: ScriptedModel, counted: dict[str, int]
) -> None:
    scripted.add("Hello there.")

    await stream_once(scripted)

    assert (counted["deep copies"], counted["success logging"]) == (0, 0)


async def test_a_litellm_callback_a_user_set_still_sees_each_streamed_call(
    scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm: Any = litellm_module()
    from litellm.integrations.custom_logger import CustomLogger

    seen: list[Any] = []
    logged = asyncio.Event()

    class Watcher(CustomLogger):
        async def async_log_success_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            seen.append(response_obj)
            logged.set()

    for name in ("callbacks", "success_callback", "_async_success_callback"):
        monkeypatch.setattr(litellm, name, [])  # litellm files a callback in these lists
    litellm.callbacks = [Watcher()]
    scripted.usage = ScriptedUsage(prompt_tokens=12, completion_tokens=3)
    scripted.add("Hello there.")

    await stream_once(scripted)
    await asyncio.wait_for(logged.wait(), timeout=10)

    (response,) = seen
    assert response.choices[0].message.content == "Hello there."
    assert response.usage.prompt_tokens == 12


async def test_a_litellm_cache_a_user_set_still_receives_streamed_replies(
    scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = litellm_module()
    from litellm.caching.caching import Cache

    cache = Cache()  # in memory
    monkeypatch.setattr(litellm, "cache", cache)
    scripted.add("Hello there.")

    await stream_once(scripted)

    assert len(cache.cache.cache_dict) == 1  # type: ignore[attr-defined]


def test_another_litellm_version_keeps_litellms_own_stream_end_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    async def litellms_own(stream: Any, cache_hit: bool) -> Any:
        raise AssertionError("never called here")

    monkeypatch.setattr(CustomStreamWrapper, "_finalize_completed_stream", litellms_own)
    monkeypatch.setattr(litellm_stream, "_installed", None)
    monkeypatch.setattr(litellm_stream, "installed_version", lambda: "1.103.0")

    with caplog.at_level(logging.WARNING, logger="clawbot.llm"):
        installed = litellm_stream.lean_stream_ends(litellm_module())

    assert not installed
    assert CustomStreamWrapper._finalize_completed_stream is litellms_own
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "clawbot.llm"]
    assert "litellm 1.103.0 is installed, not 1.102.4" in warning


async def test_a_scripted_models_price_is_gone_from_litellm_once_it_is_uninstalled() -> None:
    model = ScriptedModel(name="priced", price=ScriptedPrice(1.0, 2.0))
    model.usage = ScriptedUsage(prompt_tokens=100, completion_tokens=4)
    with model.installed():
        while_priced = await ModelClient().complete(model.model_string, ASK)
    unpriced = ScriptedModel(name="priced", usage=ScriptedUsage(100, 4))
    with unpriced.installed():
        after = await ModelClient().complete(unpriced.model_string, ASK)

    assert while_priced.cost_usd == pytest.approx(108e-6)
    assert after.cost_usd is None  # litellm's model info no longer answers with the price
