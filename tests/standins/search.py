"""SearXNG, the Brave Search API and Tavily on one 127.0.0.1 port, each speaking its wire
format and enforcing its rules, for tests/test_web_search.py.

- SearXNG under ``/searxng`` (an instance served below a path): ``GET /searxng/search`` with
  ``q`` and ``format``; a format not enabled in its settings (``searxng_formats``) is a 403, as
  SearXNG answers; no ``format`` is its HTML page. JSON: ``results[].title/url/content``, a page
  of them (no count parameter). ``/moved/search`` redirects there (an instance that moved).
- Brave: ``GET /res/v1/web/search`` with ``q`` (at most 400 characters and 50 words) and
  ``count`` (at most 20; either broken: a 422 ``VALIDATION``); the key in
  ``X-Subscription-Token`` (missing or wrong: a 422 ``SUBSCRIPTION_TOKEN_INVALID``, Brave's
  answer). JSON: ``{"type": "search", "web": {"results": [{title, url, description}]}}``, no
  ``web`` when nothing was found; the query's words are in ``<strong>`` in descriptions
  unless ``text_decorations`` is off.
- Tavily: ``POST /search`` with a JSON body (``query``, ``max_results`` 0-20); the key as
  ``Authorization: Bearer tvly-...`` (missing or wrong: a 401 with ``detail.error``). JSON:
  ``results[].title/url/content``.

``fail_with`` answers every search with that status; ``not_json`` answers 200 with an HTML
page; ``hold`` keeps every search waiting until it is set.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .local_server import served

BRAVE_KEY = "BSA-standin-key-0123456789"
TAVILY_KEY = "tvly-standin-key-0123456789"


@dataclass(frozen=True)
class Asked:
    """One search a provider received."""

    provider: str
    query: str
    count: int | None
    headers: dict[str, str]


@dataclass
class SearchStandin:
    port: int = 0
    results: list[tuple[str, str, str]] = field(default_factory=list)
    """(title, url, snippet) of every result, in order."""
    searxng_formats: set[str] = field(default_factory=lambda: {"html", "json"})
    fail_with: int | None = None
    not_json: bool = False
    hold: asyncio.Event | None = None
    asked: list[Asked] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _gate(
        self, provider: str, query: str, count: int | None, request: web.Request
    ) -> web.Response | None:
        """A scripted fault's answer, or None to answer normally."""
        self.asked.append(Asked(provider, query, count, dict(request.headers)))
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_with is not None:
            return web.json_response({"error": "scripted"}, status=self.fail_with)
        if self.not_json:
            return web.Response(text="<html><body>Busy</body></html>", content_type="text/html")
        return None

    async def searxng(self, request: web.Request) -> web.Response:
        form = request.query.get("format", "html")
        if form not in self.searxng_formats:
            return web.Response(status=403, text="Forbidden")
        query = request.query.get("q", "")
        if form != "json":
            return web.Response(
                text=f"<html><title>{query}</title></html>", content_type="text/html"
            )
        if (fault := await self._gate("searxng", query, None, request)) is not None:
            return fault
        return web.json_response(
            {
                "query": query,
                "number_of_results": len(self.results),
                "results": [
                    {"title": t, "url": u, "content": s, "engine": "standin", "score": 1.0}
                    for t, u, s in self.results
                ],
                "answers": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    async def brave(self, request: web.Request) -> web.Response:
        if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
            return _brave_error(
                422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid."
            )
        query = request.query.get("q", "")
        try:
            count = int(request.query.get("count", "20"))
        except ValueError:
            count = -1
        if not query or not 1 <= count <= 20 or len(query) > 400 or len(query.split()) > 50:
            return _brave_error(422, "VALIDATION", "Unable to validate request parameter(s)")
        if (fault := await self._gate("brave", query, count, request)) is not None:
            return fault
        marked = request.query.get("text_decorations", "true") not in ("false", "0")
        found = [
            {"title": t, "url": u, "description": _decorated(s, query, marked)}
            for t, u, s in self.results[:count]
        ]
        answer: dict[str, Any] = {"type": "search", "query": {"original": query}}
        if found:
            answer["web"] = {"type": "search", "results": found}
        return web.json_response(answer)

    async def tavily(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TAVILY_KEY}":
            return web.json_response(
                {"detail": {"error": "Unauthorized: missing or invalid API key."}}, status=401
            )
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.json_response({"detail": {"error": "Invalid JSON body"}}, status=400)
        query = body.get("query") if isinstance(body, dict) else None
        count = body.get("max_results", 5) if isinstance(body, dict) else None
        if (
            not isinstance(query, str)
            or not query
            or not isinstance(count, int)
            or not 0 <= count <= 20
        ):
            return web.json_response({"detail": {"error": "Invalid request body"}}, status=400)
        if (fault := await self._gate("tavily", query, count, request)) is not None:
            return fault
        return web.json_response(
            {
                "query": query,
                "answer": None,
                "images": [],
                "results": [
                    {"title": t, "url": u, "content": s, "score": 0.9, "raw_content": None}
                    for t, u, s in self.results[:count]
                ],
                "response_time": 0.5,
            }
        )


def _decorated(text: str, query: str, marked: bool) -> str:
    """Brave's highlighting: the query's words in ``<strong>`` unless text_decorations is off."""
    if not marked:
        return text
    words = "|".join(re.escape(word) for word in query.split())
    return re.sub(f"({words})", r"<strong>\1</strong>", text, flags=re.IGNORECASE)


def _brave_error(status: int, code: str, detail: str) -> web.Response:
    return web.json_response(
        {
            "type": "ErrorResponse",
            "error": {
                "id": "standin",
                "status": status,
                "code": code,
                "detail": detail,
                "meta": {},
            },
            "time": 0,
        },
        status=status,
    )


async def _moved(request: web.Request) -> web.Response:
    raise web.HTTPMovedPermanently(f"/searxng/search?{request.query_string}")


@asynccontextmanager
async def running_search_standin() -> AsyncIterator[SearchStandin]:
    standin = SearchStandin()
    app = web.Application()
    app.router.add_get("/searxng/search", standin.searxng)
    app.router.add_get("/res/v1/web/search", standin.brave)
    app.router.add_post("/search", standin.tavily)
    app.router.add_get("/moved/search", _moved)
    async with served(app) as standin.port:
        try:
            yield standin
        finally:
            if standin.hold is not None:
                standin.hold.set()  # a held search ends before the server does
