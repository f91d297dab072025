"""The ``web_search`` tool: a query to the provider the operator chose, results as title, URL
and snippet.

Three providers, each on its own wire format: a SearXNG instance (``GET /search?format=json``,
no key), the Brave Search API (``GET /res/v1/web/search``, the key in
``X-Subscription-Token``) and Tavily (``POST /search`` with a JSON body, the key as a Bearer
token). Without a provider the tool is not offered. The provider's address is the operator's
own (a SearXNG on the same host is common), so unlike web_fetch it is not address-checked;
the model chooses only the query and the number of results.

What comes back is data from the web: it reaches the model inside the untrusted-output mark
every tool result gets (``clawbot.runtime.llm.untrusted``), each field cut to a bound. A
provider that refuses, fails, answers something that is not JSON or does not answer within
``CLAWBOT_WEB_TIMEOUT`` gives an error result that says so; no key is ever part of one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr
from yarl import URL

from clawbot.errors import ConfigError, ToolError
from clawbot.scheduling.backlog import shorten
from clawbot.settings import Settings
from clawbot.tools.registry import Tool, ToolContext, make_tool
from clawbot.tools.web_client import answered_within, read_capped, web_session

DEFAULT_COUNT = 5
MAX_COUNT = 10
MAX_QUERY_CHARS = 400  # Brave's limit, the strictest of the three
TITLE_CHARS = 200
URL_CHARS = 500
SNIPPET_CHARS = 500
USER_AGENT = "clawbot-web-search/0.1"


@dataclass(frozen=True)
class SearchHit:
    """One result, as every provider's is shown to the model."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class SearchCall:
    """The HTTP request that asks one provider."""

    method: Literal["GET", "POST"]
    url: URL
    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Provider:
    """One search provider: how to ask it and read its answer, and the settings an operator
    is told to check when it cannot be asked."""

    label: str
    address_setting: str
    address: Callable[[Settings], str]
    needs: str
    """The setting it cannot go without (its address, or its key)."""
    needed: Callable[[Settings], str]
    call: Callable[[Settings, str, int], SearchCall]
    hits: Callable[[Any], list[dict[str, Any]]]
    snippet_key: str
    refused_hint: str


def _searxng(settings: Settings, query: str, count: int) -> SearchCall:
    # SearXNG has no result count: a page of results comes back and is cut here.
    return SearchCall(
        "GET", _endpoint(settings.searxng_url, "search"), params={"q": query, "format": "json"}
    )


def _brave(settings: Settings, query: str, count: int) -> SearchCall:
    return SearchCall(
        "GET",
        _endpoint(settings.brave_api_base, "res/v1/web/search"),
        headers={"X-Subscription-Token": _secret(settings.brave_api_key)},
        # text_decorations off: snippets without Brave's <strong> highlighting marks
        params={"q": query, "count": str(count), "text_decorations": "false"},
    )


def _tavily(settings: Settings, query: str, count: int) -> SearchCall:
    return SearchCall(
        "POST",
        _endpoint(settings.tavily_api_base, "search"),
        headers={"Authorization": f"Bearer {_secret(settings.tavily_api_key)}"},
        body={"query": query, "max_results": count, "search_depth": "basic"},
    )


def _results(data: Any) -> list[dict[str, Any]]:
    """``results`` of a SearXNG or Tavily answer."""
    return _list(data.get("results") if isinstance(data, dict) else None)


def _brave_results(data: Any) -> list[dict[str, Any]]:
    """``web.results`` of a Brave answer (``web`` is absent when nothing was found)."""
    if not isinstance(data, dict) or data.get("type") != "search":
        return _list(None)
    web = data.get("web") or {"results": []}
    return _list(web.get("results") if isinstance(web, dict) else None)


def _list(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ValueError("no list of results")
    return [item for item in value if isinstance(item, dict)]


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


PROVIDERS: dict[str, Provider] = {
    "searxng": Provider(
        label="SearXNG",
        address_setting="CLAWBOT_SEARXNG_URL",
        address=lambda settings: settings.searxng_url,
        needs="CLAWBOT_SEARXNG_URL",
        needed=lambda settings: settings.searxng_url.strip(),
        call=_searxng,
        hits=_results,
        snippet_key="content",
        refused_hint="enable the json format under search.formats in the instance's settings.yml",
    ),
    "brave": Provider(
        label="Brave Search",
        address_setting="CLAWBOT_BRAVE_API_BASE",
        address=lambda settings: settings.brave_api_base,
        needs="BRAVE_API_KEY",
        needed=lambda settings: _secret(settings.brave_api_key),
        call=_brave,
        hits=_brave_results,
        snippet_key="description",
        refused_hint="check BRAVE_API_KEY",
    ),
    "tavily": Provider(
        label="Tavily",
        address_setting="CLAWBOT_TAVILY_API_BASE",
        address=lambda settings: settings.tavily_api_base,
        needs="TAVILY_API_KEY",
        needed=lambda settings: _secret(settings.tavily_api_key),
        call=_tavily,
        hits=_results,
        snippet_key="content",
        refused_hint="check TAVILY_API_KEY",
    ),
}


def _endpoint(base: str, path: str) -> URL:
    return URL(base.strip().rstrip("/") + "/").join(URL(path))


def configured_provider(settings: Settings) -> Provider | None:
    """The provider settings choose, or None; a provider chosen without what it needs is a
    ConfigError at start, not an error at the model's first search."""
    if settings.web_search == "off":
        return None
    provider = PROVIDERS[settings.web_search]
    if not provider.needed(settings):
        raise ConfigError(
            f"CLAWBOT_WEB_SEARCH={settings.web_search} needs {provider.needs}",
            hint=f"set {provider.needs}, or CLAWBOT_WEB_SEARCH=off to go without web_search",
        )
    address = provider.address(settings).strip()
    if URL(address).scheme not in ("http", "https") or not URL(address).host:
        raise ConfigError(
            f"{provider.address_setting} is not an http:// or https:// address",
            hint="give the provider's address, e.g. http://127.0.0.1:8888",
        )
    return provider


async def _ask(provider: Provider, query: str, count: int, settings: Settings) -> Any:
    """The provider's answer as JSON, or the ToolError that says why there is none.
    Redirects are not followed: a key goes to the address the operator set, nowhere else."""
    request = provider.call(settings, query, count)
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **request.headers}
    async with (
        web_session(headers=headers) as session,
        session.request(
            request.method,
            request.url,
            params=request.params,
            json=request.body,
            allow_redirects=False,
        ) as response,
    ):
        body, cut = await read_capped(response, settings.web_max_bytes)
        status = f"{response.status} {response.reason or ''}".rstrip()
    _check_status(provider, response.status, status, body)
    if cut:
        raise ToolError(f"{provider.label} answered more than {settings.web_max_bytes:,} bytes")
    try:
        return json.loads(body)
    except ValueError:
        raise ToolError(
            f"{provider.label} answered with something that is not JSON",
            hint=f"check {provider.address_setting}",
        ) from None


def _check_status(provider: Provider, code: int, status: str, body: bytes) -> None:
    """The ToolError a status other than success is, saying what to do about it."""
    if code in (401, 403) or (code == 422 and b"SUBSCRIPTION_TOKEN" in body):  # Brave's 422
        raise ToolError(
            f"{provider.label} refused the search ({status})", hint=provider.refused_hint
        )
    if code in (429, 432, 433):  # 432, 433: Tavily's plan and spending limits
        raise ToolError(
            f"{provider.label} is rate-limiting or out of quota ({status})", hint="try again later"
        )
    if 300 <= code < 400:
        raise ToolError(
            f"{provider.label} answered with a redirect ({status})",
            hint=f"set {provider.address_setting} to the address it leads to",
        )
    if 400 <= code < 500:
        raise ToolError(
            f"{provider.label} refused the query ({status})",
            hint="try a shorter query in plain words",
        )
    if code >= 500:
        raise ToolError(f"{provider.label} failed ({status})", hint="try again later")


def _hits(provider: Provider, data: Any, count: int) -> list[SearchHit]:
    try:
        found = provider.hits(data)
    except (ValueError, AttributeError):
        raise ToolError(f"{provider.label} answered JSON without a list of results") from None
    return [
        SearchHit(
            title=_clean(item.get("title"), TITLE_CHARS),
            url=_clean(item.get("url"), URL_CHARS),
            snippet=_clean(item.get(provider.snippet_key), SNIPPET_CHARS),
        )
        for item in found
        if isinstance(item.get("url"), str) and item["url"]
    ][:count]


def _clean(value: Any, limit: int) -> str:
    """One line of at most ``limit`` characters (a provider may send null or a number)."""
    return shorten(str(value) if value is not None else "", limit)


def _shown(query: str, provider: Provider, hits: list[SearchHit]) -> str:
    head = f"Results for {json.dumps(query, ensure_ascii=False)} from {provider.label}"
    if not hits:
        return f"{head}: none."
    lines = [f"{head}:"]
    for number, hit in enumerate(hits, 1):
        lines += ["", f"{number}. {hit.title or '(no title)'}", f"   {hit.url}"]
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    return "\n".join(lines)


async def web_search(
    query: Annotated[
        str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to search for")
    ],
    ctx: ToolContext,
    count: Annotated[
        int, Field(ge=1, le=MAX_COUNT, description=f"results wanted (1-{MAX_COUNT})")
    ] = DEFAULT_COUNT,
) -> str:
    """Search the web; returns each result's title, URL and snippet (read one with web_fetch)."""
    settings = ctx.settings
    provider = configured_provider(settings)
    if provider is None:
        raise ToolError(
            "no web search provider is set", hint="the operator sets CLAWBOT_WEB_SEARCH"
        )
    wanted = " ".join(query.split())
    if not wanted:
        raise ToolError("the query is empty", hint="say what to search for")
    async with answered_within(provider.label, settings.web_timeout):
        data = await _ask(provider, wanted, count, settings)
    return _shown(wanted, provider, _hits(provider, data, count))


def web_search_tools(settings: Settings | None) -> list[Tool]:
    """``web_search`` when settings choose a provider (checked here, at start), else none."""
    if settings is None or configured_provider(settings) is None:
        return []
    return [make_tool(web_search, risk="guarded", groups=("group:network",))]
