"""An OpenAI-compatible chat-completions (and embeddings) server on 127.0.0.1 for end-to-end
tests.

The CLI runs as a subprocess with ``OPENAI_API_BASE`` pointing here, so the whole real path
(settings, litellm's OpenAI provider, HTTP) is exercised. Replies follow a script; when it runs
out, the server echoes the last user message. Runs on its own thread so synchronous tests
can drive subprocesses against it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

# text, {"tool_calls": [(name, args)...]}, {"status": 429}, {"held": [first, rest]} (streamed:
# ``first``, then ``rest`` once ``go_on()`` is called; ``holding`` is set in between), or
# {"hang": True}: the request
# never gets an answer (``hung`` is set), to kill the client mid-call.
Reply = str | dict[str, Any]
EMBEDDING_DIMS = 32


class OpenAIStandin:
    def __init__(self, script: list[Reply] | None = None) -> None:
        self.script = list(script or [])
        # Replies for conversations that began with a given user message (a subagent's task,
        # say), taken before the shared script: concurrent conversations stay deterministic.
        self.routes: dict[str, list[Reply]] = {}
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self.hung = threading.Event()
        self.holding = threading.Event()
        self._release: asyncio.Event | None = None
        self._go_on: asyncio.Event | None = None
        # Embeddings: the vector of the first entry whose words are all in a text, else one
        # of the text's hashed words (deterministic, without meaning); ``embedded`` is every
        # text asked for, ``embedding_status`` a status to fail every request with.
        self.vectors: dict[str, list[float]] = {}
        self.embedded: list[str] = []
        self.embedding_status: int | None = None
        # When set, a request whose ``Authorization`` is not ``Bearer <api_key>`` is answered
        # as OpenAI answers a wrong key: 401, with the start of the key in the message.
        self.api_key: str | None = None
        # A streamed answer's pace and an echo's length: ``chunk_seconds`` between two of
        # its text chunks (a model writing as it goes), ``echo_tail`` after each echo.
        self.chunk_seconds = 0.0
        self.echo_tail = ""
        # A model that takes its time: ``answer_seconds`` before any answer begins (the wait
        # a benchmark's model is). ``on_request`` sees each request's body and API key as it
        # arrives (on the stand-in's thread): who asked what, in the order asked.
        self.answer_seconds = 0.0
        self.on_request: Callable[[dict[str, Any], str], None] | None = None

    def _vector(self, text: str) -> list[float]:
        words = set(text.lower().replace(":", " ").split())
        for wanted, vector in self.vectors.items():
            if set(wanted.lower().split()) <= words:
                return vector
        vector = [0.0] * EMBEDDING_DIMS
        for word in words:
            vector[zlib.crc32(word.encode()) % EMBEDDING_DIMS] += 1.0
        return vector

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.embedded += inputs
        if self.embedding_status is not None:
            return web.json_response(
                {"error": {"message": "scripted failure", "type": "invalid_request_error"}},
                status=self.embedding_status,
            )
        data = []
        for index, text in enumerate(inputs):
            vector = self._vector(str(text))
            encoded: object = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{EMBEDDING_DIMS}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "standin"),
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
            }
        )

    def _refused_key(self, request: web.Request) -> web.Response | None:
        if self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return web.json_response(
            {
                "error": {
                    "message": f"Incorrect API key provided: {given[:8]}***{given[-4:]}.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
            status=401,
        )

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        if self.on_request is not None:
            key = request.headers.get("Authorization", "").removeprefix("Bearer ")
            self.on_request(body, key)
        refused = self._refused_key(request)
        if refused is not None:
            return refused
        reply: Reply
        first = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        if self.routes.get(str(first)):
            reply = self.routes[str(first)].pop(0)
        elif self.script:
            reply = self.script.pop(0)
        else:
            reply = f"echo: {asked_last(body['messages'])}{self.echo_tail}"
        if self.answer_seconds:
            await asyncio.sleep(self.answer_seconds)
        if isinstance(reply, dict) and reply.get("hang"):
            self.hung.set()
            assert self._release is not None
            await self._release.wait()
            return web.json_response({"error": {"message": "stand-in stopped"}}, status=503)
        if isinstance(reply, dict) and "status" in reply:
            return web.json_response(
                {"error": {"message": "scripted failure", "type": "rate_limit_error"}},
                status=int(reply["status"]),
                headers={"retry-after": "0"},
            )
        message: dict[str, Any] = {"role": "assistant", "content": None}
        held = reply.get("held") if isinstance(reply, dict) else None
        if held:
            message["content"] = "".join(held)
        elif isinstance(reply, str):
            message["content"] = reply
        else:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for name, args in reply["tool_calls"]
            ]
        if body.get("stream"):
            return await self._stream(request, body, message, held[0] if held else None)
        return web.json_response(
            {
                "id": f"chatcmpl-{next(self._ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "standin"),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def go_on(self) -> None:
        """Let a held stream send the rest of its answer."""
        assert self._loop is not None and self._go_on is not None
        self._loop.call_soon_threadsafe(self._go_on.set)

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        message: dict[str, Any],
        hold_after: str | None = None,
    ) -> web.StreamResponse:
        """The answer as OpenAI streams it (``stream: true``): server-sent events of
        ``chat.completion.chunk``, the text a few characters a chunk and each tool call's
        arguments in two, then the finish reason, the usage when ``stream_options`` asks for
        it, and ``[DONE]``."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):  # the client is gone (killed mid-stream)
            await self._events(response, body, message, hold_after)
        return response

    async def _events(
        self,
        response: web.StreamResponse,
        body: dict[str, Any],
        message: dict[str, Any],
        hold_after: str | None,
    ) -> None:
        ident, created = f"chatcmpl-{next(self._ids)}", int(time.time())

        async def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", "standin"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await event({"role": "assistant", "content": ""})
        text = message["content"] or ""
        pieces = [text] if hold_after is None else [hold_after, text[len(hold_after) :]]
        for number, piece in enumerate(pieces):
            if number:  # what was held back: once the test says
                assert self._go_on is not None
                self.holding.set()
                await self._go_on.wait()
            for start in range(0, len(piece), 8):
                await event({"content": piece[start : start + 8]})
                if self.chunk_seconds:
                    await asyncio.sleep(self.chunk_seconds)
        for index, call in enumerate(message.get("tool_calls") or ()):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            first = {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
            }
            await event({"tool_calls": [{"index": index, **first}]})
            await event(
                {"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}
            )
        await event({}, "tool_calls" if message.get("tool_calls") else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", "standin"),
                "choices": [],
                "usage": usage,
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._release = asyncio.Event()
        self._go_on = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/chat/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_post("/embeddings", self._embeddings)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app)
        loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    @contextmanager
    def running(self) -> Iterator[OpenAIStandin]:
        thread = threading.Thread(target=self._serve, daemon=True)
        thread.start()
        self._ready.wait(10)
        try:
            yield self
        finally:
            assert self._loop is not None and self._release is not None
            self._loop.call_soon_threadsafe(self._release.set)
            if self._go_on is not None:
                self._loop.call_soon_threadsafe(self._go_on.set)
            self._loop.call_soon_threadsafe(self._loop.stop)
            thread.join(10)


def asked_last(messages: list[dict[str, Any]]) -> str:
    """What a request asks: its user messages since the last answer, one per line (a turn
    that takes in several waiting messages has them as consecutive user messages)."""
    asked: list[str] = []
    for message in reversed(messages):
        if message["role"] == "user":
            asked.append(str(message["content"]))
        elif asked:
            break
    return "\n".join(reversed(asked))
