"""The end of a streamed call, without the work litellm does there for nobody.

When a stream's chunks run out, litellm 1.102.4's async stream wrapper
(``CustomStreamWrapper._finalize_completed_stream``) rebuilds the whole response from the
chunks (``stream_chunk_builder``) to hand back the usage chunk ``stream_options`` asked for,
with the cost stamped in it. The stream ends with a second call to it, which rebuilds the
response again, deep-copies it for litellm's response cache (made whether a cache is set or
not) and schedules litellm's success logging. A model call streamed cost 5-7 ms more than in
one piece for that (docs/benchmarks.md): against a zero-latency model, the pipeline ran at
0.4 of its speed with streaming off.

No seam removes it: ``litellm.disable_streaming_logging`` is read by the synchronous
iterator only, the copy for the cache is made whatever the cache setting, and without
``stream_options`` the provider's own usage count is lost. So this module replaces that one
method, and only while nothing would miss what it skips: the usage chunk's usage is added
up by litellm's own ``calculate_usage`` and priced once by litellm's own calculator (the
same tokens and the same cost as its full build; a stream with reasoning, audio, images or
no token counts from the provider still gets the full build, once), and the end of the
stream skips the rebuild, the copy and the logging. The stream wrapper litellm returns is
also left unpriced (litellm priced it before any chunk came, never at the call's cost).
With a litellm cache set, a success callback configured (``litellm.callbacks``,
``litellm.success_callback``, or the call's own), a proxy's deferred logging, or no usage
asked for, the stream is priced and ended as litellm does it. The replacement is installed
for the exact litellm version it was written against, and refused, with a warning, for
any other.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("clawbot.llm")

WRITTEN_FOR = "1.102.4"
"""The litellm version whose ``_finalize_completed_stream`` the replacement mirrors."""

_Finalize = Callable[[Any, bool], Awaitable[Any]]

_installed: bool | None = None
"""Whether the replacement is in place: None until :func:`lean_stream_ends` first ran."""


def installed_version() -> str:
    return importlib.metadata.version("litellm")


def lean_stream_ends(litellm: Any) -> bool:
    """Install the replacement once (for litellm ``WRITTEN_FOR`` only); whether it is in.
    Another version keeps litellm's own end of a stream, and says so once."""
    global _installed
    if _installed is None:
        _installed = _install(litellm)
    return _installed


def _install(litellm: Any) -> bool:
    version = installed_version()
    if version != WRITTEN_FOR:
        log.warning(
            "litellm %s is installed, not %s: its end of a streamed call is left as it is"
            " (5-7 ms a streamed call more than in one piece). Install litellm==%s, as"
            " pyproject.toml pins it, or check clawbot/runtime/litellm_stream.py against"
            " litellm %s and update WRITTEN_FOR.",
            version,
            WRITTEN_FOR,
            WRITTEN_FOR,
            version,
        )
        return False
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    original: _Finalize = CustomStreamWrapper._finalize_completed_stream

    async def finalize(stream: Any, cache_hit: bool) -> Any:
        if not _nothing_needs_the_full_end(litellm, stream):
            return await original(stream, cache_hit)
        if stream.sent_stream_usage:  # the usage chunk went out: the stream ends here
            stream._restore_consumer_correlation_context()
            raise StopAsyncIteration
        usage = _usage_priced_once(stream)
        if usage is None:  # a stream this path does not cover: litellm's own build, once
            try:
                built = litellm.stream_chunk_builder(
                    chunks=stream.chunks,
                    messages=stream.messages,
                    logging_obj=stream.logging_obj,
                    count_prompt_tokens=stream.count_prompt_tokens,
                )
            except Exception:  # litellm's own end recovers what usage it can, and logs why
                return await original(stream, cache_hit)
            if built is None:
                return await original(stream, cache_hit)
            usage = built.usage  # with the cost litellm stamped in it
        usage_chunk = stream.model_response_creator()
        usage_chunk.usage = usage
        stream.sent_stream_usage = True
        return usage_chunk

    finalize.__doc__ = f"litellm {WRITTEN_FOR}'s end of a stream, lean (clawbot: {__name__})."
    setattr(CustomStreamWrapper, "_finalize_completed_stream", finalize)  # noqa: B010
    _leave_stream_wrappers_unpriced(litellm, CustomStreamWrapper)
    return True


def _leave_stream_wrappers_unpriced(litellm: Any, wrapper_class: type) -> None:
    """litellm prices every result it returns (``update_response_metadata``), the stream
    wrapper too, before any chunk came: 0.0 for a priced model, litellm's slow not-found
    path for another, never the call's cost (its usage chunk carries that). While nothing
    reads the wrapper's price (no cache, no success callback), that pricing is skipped and
    the wrapper's ``response_cost`` is None; its other metadata is litellm's. litellm looks
    the function up on its module at each call, so replacing it there is the seam."""
    litellm_utils: Any = importlib.import_module("litellm.utils")
    original = litellm_utils.update_response_metadata

    def update_response_metadata(result: Any, logging_obj: Any, *args: Any, **kwargs: Any) -> Any:
        if not (
            isinstance(result, wrapper_class) and _no_one_reads_the_price(litellm, logging_obj)
        ):
            return original(result, logging_obj, *args, **kwargs)
        logging_obj._response_cost_calculator = _unpriced  # shadows the method for this call
        try:
            return original(result, logging_obj, *args, **kwargs)
        finally:
            del logging_obj._response_cost_calculator

    litellm_utils.update_response_metadata = update_response_metadata


def _unpriced(*args: Any, **kwargs: Any) -> None:
    """A stream wrapper's price: unknown until its usage chunk."""
    return None


_NOT_PLAIN = (
    "reasoning_content",
    "thinking_blocks",
    "annotations",
    "audio",
    "images",
    "provider_specific_fields",
)
"""Delta fields whose stream litellm's full build handles (reasoning counted, parts joined)."""


def _usage_priced_once(stream: Any) -> Any:
    """The call's usage from the chunks, added up by litellm's own ``calculate_usage``, with
    its cost from litellm's own calculator run once (the provider's reported cost kept), as
    the full build makes it: for a stream of text and tool calls that carries the
    provider's token counts. None for any other (litellm then builds the whole response).
    What it skips of the full build: the reply assembled again (clawbot adds up the chunks
    itself) and the response priced a second and third time for litellm's own logging."""
    from litellm.litellm_core_utils.streaming_chunk_builder_utils import ChunkProcessor
    from litellm.main import _stamp_streaming_usage_cost

    processor = ChunkProcessor(stream.chunks, stream.messages)
    chunks = processor.chunks
    sent = [used for c in chunks if (used := ChunkProcessor._extract_usage_chunk(c))]
    if not (_counted(sent, "prompt_tokens") and _counted(sent, "completion_tokens")):
        return None  # litellm counts the tokens itself (tiktoken): its own build does that
    text: list[str] = []
    tool_calls = False
    for chunk in chunks:
        choices = _field(chunk, "choices")
        if not choices:
            continue
        delta = _field(choices[0], "delta")
        if delta is None:  # a text completion's choice: litellm's own route
            return None
        if any(_field(delta, name) is not None for name in _NOT_PLAIN):
            return None
        tool_calls = tool_calls or bool(
            _field(delta, "tool_calls") or _field(delta, "function_call")
        )
        content = _field(delta, "content")
        if isinstance(content, str):
            text.append(content)
    response = processor.build_base_response(chunks)
    response.choices[0].message.content = "".join(text)
    usage = processor.calculate_usage(
        chunks=chunks,
        model=chunks[0]["model"],
        completion_output="".join(text),
        messages=stream.messages,
        reasoning_tokens=None if tool_calls else 0,  # as litellm's build passes them
        count_prompt_tokens=stream.count_prompt_tokens,
    )
    setattr(response, "usage", usage)  # noqa: B010 (as litellm's build sets it)
    _stamp_streaming_usage_cost(usage, response, stream.logging_obj)
    return usage


def _nothing_needs_the_full_end(litellm: Any, stream: Any) -> bool:
    """Whether the stream's end may skip litellm's cache copy and success logging: the
    finish chunk went out, the caller asked for the usage chunk, no cache is set and no
    success callback (global or the call's own) nor a proxy's deferred logging waits."""
    if not (stream.sent_last_chunk and stream.send_stream_usage):
        return False
    return _no_one_reads_the_price(litellm, stream.logging_obj)


def _no_one_reads_the_price(litellm: Any, logging_obj: Any) -> bool:
    """No litellm cache is set and no success callback (global or the call's own) nor a
    proxy's deferred logging waits for the call."""
    if litellm.cache is not None:
        return False
    if litellm.callbacks or litellm.success_callback or litellm._async_success_callback:
        return False
    return not (
        getattr(logging_obj, "dynamic_success_callbacks", None)
        or getattr(logging_obj, "dynamic_async_success_callbacks", None)
        or getattr(logging_obj, "_on_deferred_stream_complete", None) is not None
    )


def _counted(usages: list[Any], name: str) -> bool:
    """Whether the provider's usage counts ``name`` (a whole number above 0)."""
    return any(isinstance(count := getattr(used, name, None), int) and count > 0 for used in usages)


def _field(part: Any, name: str) -> Any:
    """A field of a chunk's part, whether litellm made it an object or left it a dict."""
    return part.get(name) if isinstance(part, dict) else getattr(part, name, None)
