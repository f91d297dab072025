"""Scripted models for testing agents without a provider, through the real litellm path.

Like pydantic-ai's ``TestModel`` / ``FunctionModel``: register a model, use its model string
(``scripted/<name>``) wherever a model is configured, and assert on the requests it received.

    model = ScriptedModel([call("file_read", path="notes.md"), "Your notes say hi."])
    with model.installed():
        ...  # run clawbot with model.model_string
    assert model.requests[1].tool_results == ["hi"]

The same model string is a speech model too (``litellm.aspeech``, ``CLAWBOT_TTS_MODEL``): it
answers ``scripted_audio`` of the text, or its ``speech`` failure, and keeps each
request in ``speech_requests``.

A scripted model may see images (``vision=True``: litellm's model info says so, and each
request's image blocks are in ``ModelRequest.images``) and transcribe audio as a
speech-to-text model (``transcripts``, answered in order; ``transcriptions`` keeps what it
heard): see ``clawbot.testing.media``.

A request with ``stream=True`` (a turn whose reply is shown while it is written) is answered
as a stream of ``chunk_size`` characters a chunk; give the model a :class:`StreamPace` to let
the chunks out one by one, when the test says, instead of all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from clawbot.channels.memory import ChatRules, MemoryChannel, Posted
from clawbot.channels.pacer import VirtualClock
from clawbot.providers import litellm_module
from clawbot.runtime.llm import trusted_text
from clawbot.testing.media import (
    Deferred,
    SpeechRequest,
    TranscriptionRequest,
    install_speech,
    install_transcription,
    scripted_audio,
)
from clawbot.testing.model_info import (
    ScriptedPrice,
    declare_model_info,
    forget_model_info,
)
from clawbot.testing.streams import StreamPace, chunk, text_chunks, tool_call_delta

PROVIDER = "scripted"
__all__ = [
    "ChatRules",
    "MemoryChannel",
    "ModelRequest",
    "Posted",
    "ScriptedAnswer",
    "ScriptedCall",
    "ScriptedFailure",
    "ScriptedModel",
    "ScriptedPrice",
    "ScriptedUsage",
    "StreamPace",
    "VirtualClock",
    "answer",
    "call",
    "scripted_audio",
]


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call the scripted model will make."""

    name: str
    arguments: dict[str, Any]


def call(name: str, /, **arguments: Any) -> ScriptedCall:
    return ScriptedCall(name=name, arguments=arguments)


@dataclass(frozen=True)
class ScriptedAnswer:
    """Text and tool calls in one answer ("Let me look that up." and a call)."""

    text: str
    calls: tuple[ScriptedCall, ...]


def answer(text: str, *calls: ScriptedCall) -> ScriptedAnswer:
    return ScriptedAnswer(text=text, calls=calls)


@dataclass(frozen=True)
class ScriptedFailure:
    """A provider failure to raise instead of answering, as litellm raises it:
    ``rate_limit`` (a 429, saying ``retry_after`` seconds when given), ``quota`` (a 429
    whose quota is spent, OpenAI's ``insufficient_quota``), ``timeout``, ``server_error``
    (a 500), ``auth`` (a 401: the key was rejected), ``bad_request`` or ``context_length``
    (the request was longer than the model's input window, as litellm's
    ContextWindowExceededError says). A streamed answer first sends ``partial`` (when
    given), then fails: the connection broke mid-way."""

    kind: str = "rate_limit"
    partial: str = ""
    retry_after: float | None = None


Step = str | ScriptedCall | list[ScriptedCall] | ScriptedAnswer | ScriptedFailure


@dataclass(frozen=True)
class ScriptedUsage:
    """What the scripted model says each call used, in the response as a provider does:
    tokens, and a cost when given. litellm has no price for a scripted model, so without
    ``cost_usd`` the response's cost is unknown, as for any unpriced model; with it, the
    cost is passed on as litellm passes on a cost the provider computed itself.
    ``cached_tokens`` of the prompt's came from the provider's cache. A count given as
    anything but a whole number (``"lots"``, ``-3``) is sent as it is: a provider's
    malformed usage."""

    prompt_tokens: int | str = 0
    completion_tokens: int | str = 0
    cost_usd: float | None = None
    cached_tokens: int = 0

    def counts(self) -> dict[str, Any]:
        """The usage as a provider's response carries it (OpenAI's names)."""
        counts: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if isinstance(self.prompt_tokens, int) and isinstance(self.completion_tokens, int):
            counts["total_tokens"] = self.prompt_tokens + self.completion_tokens
        if self.cached_tokens:
            counts["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return counts


@dataclass(frozen=True)
class ModelRequest:
    """One request as the model received it."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    streamed: bool = False
    """The caller asked for the answer as a stream (``stream=True``)."""
    api_key: str | None = field(default=None, repr=False)
    """The key the call carried, when the caller passed one (``OPENAI_API_KEYS`` rotation)."""

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    @property
    def system(self) -> str:
        return "\n".join(m["content"] or "" for m in self.messages if m["role"] == "system")

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message["role"] == "user":
                return _text_of(message["content"])
        return ""

    @property
    def images(self) -> list[str]:
        """The images the request shows (their data URLs), in order."""
        return [
            part["image_url"]["url"]
            for message in self.messages
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if part.get("type") == "image_url"
        ]

    @property
    def tool_results(self) -> list[str]:
        """The tools' outputs in this request as the tools returned them, without the
        untrusted-data mark the model sees around each (that is in ``messages``)."""
        return [trusted_text(str(m["content"])) for m in self.messages if m["role"] == "tool"]


def _text_of(content: Any) -> str:
    """A message's text: the string, or the text parts of a list of parts, one a line."""
    if isinstance(content, list):
        texts = (part.get("text", "") for part in content if part.get("type") == "text")
        return "\n".join(str(text) for text in texts)
    return str(content)


ReplyFunction = Callable[[ModelRequest], Step | Awaitable[Step]]


@dataclass
class ScriptedModel:
    """Answers each request with the next scripted step, or from ``function`` when given.

    When the script runs out it answers ``default_text``; as a speech model it answers
    :func:`scripted_audio` of the text, or fails as ``speech`` says. ``delay`` adds simulated model
    latency (in seconds) to every call; ``usage`` is what every response says the call
    used (tokens and cost; none by default). A streamed answer comes ``chunk_size``
    characters a chunk (a tool call in two chunks, its arguments cut in half), each chunk
    waiting for ``pace`` when one is given. Each request is kept in ``requests`` for assertions;
    ``record=False`` keeps none, for long runs (load tests, benchmarks) that would otherwise
    hold every request, with its own copy of the tool schemas, in memory.

    ``outage``, while set, fails every request that way (a provider that is down), and
    ``key_failures`` fails each request that carries one of its keys (a key over its rate
    or quota): neither uses up a scripted step, so the script goes on where it was once
    the model answers again.
    """

    script: Sequence[Step] = ()
    function: ReplyFunction | None = None
    name: str = "test"
    default_text: str = "ok"
    delay: float = 0.0
    usage: ScriptedUsage | None = None
    record: bool = True
    chunk_size: int = 8
    pace: StreamPace | None = None
    requests: list[ModelRequest] = field(default_factory=list)
    outage: ScriptedFailure | None = None
    key_failures: dict[str, ScriptedFailure] = field(default_factory=dict)
    speech: ScriptedFailure | None = None
    """When set, every speech request fails this way (a speech provider that is down)."""
    speech_requests: list[SpeechRequest] = field(default_factory=list)
    vision: bool = False
    price: ScriptedPrice | None = None
    """A price in litellm's model map while installed (litellm prices its calls)."""
    transcripts: Sequence[str | ScriptedFailure] = ()
    transcriptions: list[TranscriptionRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._steps: deque[Step] = deque(self.script)
        self._heard: deque[str | ScriptedFailure] = deque(self.transcripts)
        self._ids = itertools.count(1)

    def hear(self, *transcripts: str | ScriptedFailure) -> ScriptedModel:
        """Append transcripts (answers for the next transcriptions, in order)."""
        self._heard.extend(transcripts)
        return self

    def transcribe(self, request: TranscriptionRequest) -> str | Exception:
        """The next scripted transcript (``default_text`` once they ran out), or its
        failure as litellm raises it."""
        self.transcriptions.append(request)
        heard = self._heard.popleft() if self._heard else self.default_text
        if isinstance(heard, ScriptedFailure):
            return _failure(litellm_module(), heard, request.model)
        return heard

    def add(self, *steps: Step) -> ScriptedModel:
        """Append steps to the script (answers for the next requests, in order)."""
        self._steps.extend(steps)
        return self

    @property
    def model_string(self) -> str:
        return f"{PROVIDER}/{self.name}"

    async def respond(self, request: ModelRequest) -> Step:
        if self.record:
            self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.outage is not None:
            return self.outage
        refused = self.key_failures.get(request.api_key or "")
        if refused is not None:
            return refused
        if self.function is not None:
            step = self.function(request)
            return await step if asyncio.iscoroutine(step) else step  # type: ignore[return-value]
        return self._steps.popleft() if self._steps else self.default_text

    async def speak(self, request: SpeechRequest) -> bytes:
        self.speech_requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.speech is not None:
            raise _failure(litellm_module(), self.speech, request.model)
        return scripted_audio(request.input)

    def next_call_id(self) -> str:
        return f"call_{next(self._ids)}"

    @contextlib.contextmanager
    def installed(self) -> Iterator[ScriptedModel]:
        """Route ``scripted/<name>`` to this model for the duration of the block."""
        install(self)
        try:
            yield self
        finally:
            uninstall(self)


_models: dict[str, ScriptedModel] = {}
_handler: Any = None


def install(model: ScriptedModel) -> None:
    """Register the scripted provider with litellm (once) and this model under its name."""
    litellm: Any = litellm_module()
    global _handler
    if _handler is None:
        _handler = _make_handler(litellm)
    if not any(item["provider"] == PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": PROVIDER, "custom_handler": _handler},
        ]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()  # type: ignore[no-untyped-call]
    install_speech(litellm, _models.get)
    install_transcription(litellm, _models.get)
    declare_model_info(litellm, model.model_string, vision=model.vision, price=model.price)
    _models[model.name] = model


def uninstall(model: ScriptedModel) -> None:
    if _models.get(model.name) is model:
        del _models[model.name]
        forget_model_info(litellm_module(), model.model_string)


def _make_handler(litellm: Any) -> Any:
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import (
        ChatCompletionMessageToolCall,
        Function,
        Message,
        PromptTokensDetailsWrapper,
        Usage,
    )

    class ScriptedHandler(CustomLLM):
        def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            """litellm calls this on a worker thread and awaits what it returns on the event
            loop, unless the call was cancelled in between (a stopped turn): then it drops
            it. A coroutine function's coroutine dropped unawaited warns that it "was never
            awaited", so this returns one that starts nothing until it is awaited."""
            return Deferred(lambda: self._answer(kwargs))

        def _request(self, kwargs: dict[str, Any]) -> tuple[ScriptedModel, ModelRequest]:
            model_name = kwargs["model"].split("/", 1)[-1]
            model = _models.get(model_name)
            if model is None:
                raise litellm.NotFoundError(
                    message=f"no scripted model named {model_name!r} is installed",
                    model=kwargs["model"],
                    llm_provider=PROVIDER,
                )
            params = kwargs.get("optional_params") or {}
            request = ModelRequest(
                model=kwargs["model"],
                messages=json.loads(json.dumps(kwargs["messages"], default=str)),
                tools=list(params.get("tools") or []),
                streamed=bool(params.get("stream")),
                api_key=kwargs.get("api_key"),
            )
            return model, request

        async def _answer(self, kwargs: dict[str, Any]) -> Any:
            model, request = self._request(kwargs)
            step = await model.respond(request)
            response = kwargs["model_response"]
            if isinstance(step, ScriptedFailure):
                raise _failure(litellm, step, kwargs["model"])
            if isinstance(step, str):
                message = Message(content=step, role="assistant")
            else:
                message = Message(
                    content=step.text if isinstance(step, ScriptedAnswer) else None,
                    role="assistant",
                    tool_calls=[
                        ChatCompletionMessageToolCall(
                            id=model.next_call_id(),
                            type="function",
                            function=Function(name=c.name, arguments=json.dumps(c.arguments)),
                        )
                        for c in _calls(step)
                    ],
                )
            response.choices[0].message = message
            response.choices[0].finish_reason = "tool_calls" if message.tool_calls else "stop"
            response.model = kwargs["model"]
            response.created = int(time.time())
            if model.usage is not None:
                used = model.usage
                usage = Usage(total_tokens=0)
                for key in ("prompt_tokens", "completion_tokens"):  # as sent, malformed or not
                    setattr(usage, key, getattr(used, key))
                if used.cached_tokens:
                    usage.prompt_tokens_details = PromptTokensDetailsWrapper(
                        cached_tokens=used.cached_tokens
                    )
                response.usage = usage
                if used.cost_usd is not None:
                    # What litellm keeps as the response's cost instead of pricing it.
                    response._hidden_params["response_cost"] = used.cost_usd
            return response

        async def astreaming(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
            """The answer as a provider streams it: text in ``chunk_size`` pieces, each tool
            call in two chunks, then a last chunk with the finish reason and the usage (a
            provider-reported cost in it, when the script gives one, as OpenRouter does)."""
            model, request = self._request(kwargs)
            step = await model.respond(request)
            pieces: list[tuple[str, dict[str, Any] | None]] = []
            if isinstance(step, ScriptedFailure):
                pieces = [(text, None) for text in text_chunks(step.partial, model.chunk_size)]
            elif isinstance(step, str):
                pieces = [(text, None) for text in text_chunks(step, model.chunk_size)]
            else:
                if isinstance(step, ScriptedAnswer):
                    pieces = [(text, None) for text in text_chunks(step.text, model.chunk_size)]
                for index, c in enumerate(_calls(step)):
                    arguments = json.dumps(c.arguments)
                    half = len(arguments) // 2
                    pieces.append(
                        ("", tool_call_delta(index, model.next_call_id(), c.name, arguments[:half]))
                    )
                    pieces.append(("", tool_call_delta(index, None, None, arguments[half:])))
            for text, tool_use in pieces:
                if model.pace is not None:
                    await model.pace.next_chunk()
                else:
                    await asyncio.sleep(0)  # as a chunk from the network: others run between
                yield chunk(text, tool_use=tool_use)
            if isinstance(step, ScriptedFailure):
                if model.pace is not None:
                    await model.pace.next_chunk()
                raise _failure(litellm, step, kwargs["model"])
            usage = (model.usage or ScriptedUsage()).counts()
            used = model.usage or ScriptedUsage()
            if used.cost_usd is not None:
                usage["cost"] = used.cost_usd
            reason = "tool_calls" if not isinstance(step, str) and _calls(step) else "stop"
            yield chunk("", finished=reason, usage=usage)

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            raise litellm.BadRequestError(
                message="the scripted model is async only: use litellm.acompletion",
                model=kwargs.get("model", ""),
                llm_provider=PROVIDER,
            )

    return ScriptedHandler()


def _calls(step: ScriptedCall | list[ScriptedCall] | ScriptedAnswer) -> list[ScriptedCall]:
    if isinstance(step, ScriptedAnswer):
        return list(step.calls)
    return [step] if isinstance(step, ScriptedCall) else step


def _failure(litellm: Any, failure: ScriptedFailure, model: str) -> Exception:
    common = {"model": model, "llm_provider": PROVIDER}
    if failure.kind == "rate_limit":
        import httpx  # litellm's own HTTP library: a 429 carries its headers in a response

        headers = {} if failure.retry_after is None else {"retry-after": f"{failure.retry_after:g}"}
        return litellm.RateLimitError(  # type: ignore[no-any-return]
            message="scripted 429: slow down",
            response=httpx.Response(429, headers=headers),
            **common,
        )
    if failure.kind == "quota":
        return litellm.RateLimitError(  # type: ignore[no-any-return]
            message="scripted 429: You exceeded your current quota (insufficient_quota)", **common
        )
    if failure.kind == "auth":
        return litellm.AuthenticationError(  # type: ignore[no-any-return]
            message="scripted 401: invalid API key", **common
        )
    if failure.kind == "timeout":
        return litellm.Timeout(message="scripted timeout", **common)  # type: ignore[no-any-return]
    if failure.kind == "server_error":
        return litellm.InternalServerError(message="scripted 500", **common)  # type: ignore[no-any-return]
    if failure.kind == "context_length":
        return litellm.ContextWindowExceededError(  # type: ignore[no-any-return]
            message="scripted: the request is longer than the context window", **common
        )
    return litellm.BadRequestError(message="scripted bad request", **common)  # type: ignore[no-any-return]
