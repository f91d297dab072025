"""A model call's text as it is written, for whoever shows it (a chat, a terminal).

The runtime knows nothing of chats: a turn's streaming plug-in binds a :class:`TextSink`
around each model call (:func:`streaming_to`), and the model client, seeing one bound,
asks the provider to stream (litellm ``stream=True``) and hands the sink the text so far
after each delta. Without a sink (an internal session, a scheduled job's, streaming off) a
call is made as it always was, in one piece.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol


class TextSink(Protocol):
    """Where one turn's model text goes while it is written."""

    def on_text(self, text: str) -> None:
        """The text of the current model call so far (each call starts from nothing).
        Called on the event loop for every delta: must return at once, never wait."""

    def on_call_end(self, tool_calls: bool) -> None:
        """The model call ended; ``tool_calls``: it asked for tools, so its text was not
        the reply (the next call's text replaces it)."""


_sink: ContextVar[TextSink | None] = ContextVar("clawbot_text_sink", default=None)


def current_sink() -> TextSink | None:
    """The sink the model call made now streams to, if any."""
    return _sink.get()


@contextlib.contextmanager
def streaming_to(sink: TextSink | None) -> Iterator[None]:
    """Model calls made inside the block stream their text to ``sink`` (``None``: they do
    not, as for a summary made in the middle of a turn)."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)
