"""The model path: its provider knowledge stays in agreement with litellm, and each call's usage
and cost (litellm's price, when it has one) are kept with its answer."""

from __future__ import annotations

import gc
import subprocess
import sys
import warnings

import pytest

from clawbot.app import Clawbot
from clawbot.errors import ProviderError
from clawbot.messages import ToolCallBlock
from clawbot.providers import KNOWN_PROVIDER_KEYS, litellm_module, missing_credentials
from clawbot.runtime.llm import ModelClient, reply_from_response
from clawbot.runtime.text_stream import streaming_to
from clawbot.testing import ScriptedFailure, ScriptedModel, ScriptedUsage, answer, call

from .conftest import Chat


@pytest.mark.parametrize("provider", sorted(KNOWN_PROVIDER_KEYS))
def test_known_provider_keys_agree_with_litellm(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = litellm_module()
    for name in {n for names in KNOWN_PROVIDER_KEYS.values() for n in names}:
        monkeypatch.delenv(name, raising=False)
    model = {
        "openai": "openai/gpt-4o-mini",
        "anthropic": "anthropic/claude-3-5-sonnet-20241022",
        "gemini": "gemini/gemini-1.5-pro",
        "groq": "groq/llama3-8b-8192",
        "mistral": "mistral/mistral-large-latest",
        "openrouter": "openrouter/openai/gpt-4o",
        "deepseek": "deepseek/deepseek-chat",
        "xai": "xai/grok-2",
    }[provider]

    assert set(litellm.validate_environment(model)["missing_keys"]) == set(
        KNOWN_PROVIDER_KEYS[provider]
    )
    assert set(missing_credentials(model)) == set(KNOWN_PROVIDER_KEYS[provider])


def test_a_present_key_satisfies_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")

    assert missing_credentials("anthropic/claude-3-5-sonnet-20241022") == []


def test_a_local_ollama_model_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)

    assert missing_credentials("ollama/llama3") == []


def test_importing_clawbot_llm_does_not_import_litellm() -> None:
    import subprocess
    import sys

    code = (
        "import sys, clawbot.runtime.llm, clawbot.cli.main, clawbot.routing.router; "
        "print('litellm' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert result.stdout.strip() == "False"


def test_the_command_lines_preload_takes_import_time_objects_out_of_full_collections() -> None:
    """A fresh process, as ``clawbot run`` and ``clawbot chat`` start: after the preload,
    the collector's full passes no longer walk litellm's import-time objects."""
    script = (
        "import gc, threading\n"
        "from clawbot.providers import preload_in_background\n"
        "preload_in_background()\n"
        "for thread in threading.enumerate():\n"
        "    if thread.name == 'litellm-import':\n"
        "        thread.join()\n"
        "print(gc.get_freeze_count(), len(gc.get_objects()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    frozen, still_tracked = map(int, done.stdout.split())

    assert frozen > 100_000
    assert still_tracked < frozen // 50


async def test_a_priced_models_reply_carries_its_cost_from_litellms_bundled_prices() -> None:
    litellm = litellm_module()
    response = await litellm.acompletion(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], mock_response="Hello"
    )

    reply = reply_from_response(response)

    assert reply.cost_usd is not None and reply.cost_usd > 0
    assert reply.meta == {"usage": reply.usage, "cost_usd": reply.cost_usd}


async def test_each_model_calls_cost_is_kept_beside_its_usage(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=12, completion_tokens=3, cost_usd=0.002)
    scripted.add("Hello.")

    await chat.say("hi")

    (answer,) = [
        e for e in await bot.store.transcripts.load("memory:chat1", 0) if e.role == "assistant"
    ]
    assert answer.meta == {
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
        "cost_usd": 0.002,
    }


async def test_a_model_without_a_price_keeps_its_usage_and_no_cost(
    bot: Clawbot, chat: Chat, scripted: ScriptedModel
) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=12, completion_tokens=3)
    scripted.add("Hello.")

    await chat.say("hi")

    (answer,) = [
        e for e in await bot.store.transcripts.load("memory:chat1", 0) if e.role == "assistant"
    ]
    assert answer.meta == {"usage": {"prompt_tokens": 12, "completion_tokens": 3}}


def test_a_scripted_answer_litellm_drops_unawaited_leaves_no_warning() -> None:
    # litellm makes the handler's coroutine on a worker thread and drops it when the call
    # was cancelled meanwhile (a stopped turn): that must not warn "never awaited".
    model = ScriptedModel(name="dropped")
    with model.installed():
        (handler,) = [
            item["custom_handler"]
            for item in litellm_module().custom_provider_map
            if item["provider"] == "scripted"
        ]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            handler.acompletion(model=model.model_string, messages=[])
            gc.collect()

    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert model.requests == []


class Sink:
    """Keeps what a streamed call showed."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.ends: list[bool] = []

    def on_text(self, text: str) -> None:
        self.texts.append(text)

    def on_call_end(self, tool_calls: bool) -> None:
        self.ends.append(tool_calls)


TOOL = {"type": "function", "function": {"name": "file_read", "parameters": {"type": "object"}}}
ASK = [{"role": "user", "content": "hi"}]


async def test_a_streamed_call_shows_its_text_as_it_grows_and_assembles_the_tool_calls(
    scripted: ScriptedModel,
) -> None:
    scripted.chunk_size = 6
    scripted.add(answer("Let me look.", call("file_read", path="notes.md", lines=[1, 2])))
    sink = Sink()

    with streaming_to(sink):
        reply = await ModelClient().complete(scripted.model_string, ASK, [TOOL])

    assert sink.texts == ["Let me", "Let me look."]
    assert sink.ends == [True]
    assert reply.text == "Let me look."
    assert reply.tool_calls == (
        ToolCallBlock(
            id="call_1", name="file_read", arguments={"path": "notes.md", "lines": [1, 2]}
        ),
    )
    assert scripted.requests[0].streamed


async def test_a_streamed_call_keeps_its_usage_and_cost(scripted: ScriptedModel) -> None:
    scripted.usage = ScriptedUsage(prompt_tokens=12, completion_tokens=3, cost_usd=0.002)
    scripted.add("Hello.")

    with streaming_to(Sink()):
        reply = await ModelClient().complete(scripted.model_string, ASK)

    assert reply.meta == {"usage": {"prompt_tokens": 12, "completion_tokens": 3}, "cost_usd": 0.002}


async def test_a_stream_that_fails_before_its_first_chunk_is_retried(
    scripted: ScriptedModel,
) -> None:
    scripted.add(ScriptedFailure("server_error"), "Second try.")

    with streaming_to(Sink()):
        reply = await ModelClient(backoff=0).complete(scripted.model_string, ASK)

    assert reply.text == "Second try."
    assert len(scripted.requests) == 2


async def test_a_stream_that_breaks_after_its_first_chunk_is_not_retried(
    scripted: ScriptedModel,
) -> None:
    # the person may have read the start: asking again would show a different answer
    scripted.add(ScriptedFailure("server_error", partial="The first half"), "Second try.")
    sink = Sink()

    with streaming_to(sink), pytest.raises(ProviderError, match="in the middle of its answer"):
        await ModelClient(backoff=0).complete(scripted.model_string, ASK)

    assert sink.texts[-1] == "The first half"
    assert len(scripted.requests) == 1


async def test_a_call_without_a_sink_is_not_streamed(scripted: ScriptedModel) -> None:
    scripted.add("Hello.")

    reply = await ModelClient().complete(scripted.model_string, ASK)

    assert reply.text == "Hello."
    assert not scripted.requests[0].streamed
