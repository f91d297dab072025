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
method, and only while nothing would miss what it skips: the usage chunk is built once
(by litellm's own ``stream_chunk_builder``: the same tokens and the same cost), and the end
of the stream skips the rebuild, the copy and the logging. With a litellm cache set, a
success callback configured (``litellm.callbacks``, ``litellm.success_callback``, or the
call's own), a proxy's deferred logging, or no usage asked for, the stream ends as litellm
ends it. The replacement is installed for the exact litellm version it was written
against, and refused, with a warning, for any other.
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
        usage_chunk = stream.model_response_creator()
        usage_chunk.usage = built.usage  # with the cost litellm stamped in it
        stream.sent_stream_usage = True
        return usage_chunk

    finalize.__doc__ = f"litellm {WRITTEN_FOR}'s end of a stream, lean (clawbot: {__name__})."
    setattr(CustomStreamWrapper, "_finalize_completed_stream", finalize)  # noqa: B010
    return True


def _nothing_needs_the_full_end(litellm: Any, stream: Any) -> bool:
    """Whether the stream's end may skip litellm's cache copy and success logging: the
    finish chunk went out, the caller asked for the usage chunk, no cache is set and no
    success callback (global or the call's own) nor a proxy's deferred logging waits."""
    if not (stream.sent_last_chunk and stream.send_stream_usage):
        return False
    if litellm.cache is not None:
        return False
    if litellm.callbacks or litellm.success_callback or litellm._async_success_callback:
        return False
    logging_obj = stream.logging_obj
    return not (
        getattr(logging_obj, "dynamic_success_callbacks", None)
        or getattr(logging_obj, "dynamic_async_success_callbacks", None)
        or getattr(logging_obj, "_on_deferred_stream_complete", None) is not None
    )
