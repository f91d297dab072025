"""The ``web_fetch`` tool: one web page as readable text, from public addresses only.

A model that can fetch any URL can be talked into fetching the bot's own host (a local admin
port, a cloud metadata service at 169.254.169.254) or an intranet. So, at every hop of a
redirect chain alike: only http and https; the host name is resolved, and every address it
resolves to must be public (not private, loopback, link-local, multicast, reserved or
unspecified); and the connection goes to an address so checked, handed to aiohttp by a
resolver that knows nothing else, never to a second look-up a DNS server could answer
differently (DNS rebinding). ``CLAWBOT_WEB_ALLOW_HOSTS`` names the hosts exempt from the
address check (an intranet's; a test's server on 127.0.0.1).

The body is read up to ``CLAWBOT_WEB_MAX_BYTES`` and the whole fetch bounded by
``CLAWBOT_WEB_TIMEOUT``; HTML is reduced to text (``clawbot.tools.html_text``).
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import socket
from collections.abc import Collection
from typing import Annotated

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from pydantic import Field
from yarl import URL

from clawbot.errors import ToolError
from clawbot.scheduling.backlog import shorten
from clawbot.tools.html_text import html_to_text
from clawbot.tools.registry import Tool, ToolContext, make_tool
from clawbot.tools.web_client import answered_within, read_capped, web_session

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
SHOWN_URL_CHARS = 120
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-ndjson"}
)
USER_AGENT = "clawbot-web-fetch/0.1"
ALLOW_HINT = (
    "web_fetch reaches public addresses only; the operator can name a host in "
    "CLAWBOT_WEB_ALLOW_HOSTS if it is meant to be reached"
)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def why_refused(address: Address) -> str | None:
    """Why ``address`` is not one web_fetch may connect to, or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            return why_refused(embedded)
    for flag, reason in (
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address.is_unspecified, "an unspecified address"),
        (address.is_reserved, "a reserved address"),
        (address.is_private, "a private address"),
        (not address.is_global, "not a public address"),
    ):
        if flag:
            return reason
    return None


class CheckedResolver(AbstractResolver):
    """Answers aiohttp's look-ups with the addresses already checked for each host, and
    refuses any host not checked: the connection goes where the check looked."""

    def __init__(self) -> None:
        self.checked: dict[str, list[ResolveResult]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = self.checked.get(host)
        if not found:
            raise OSError(f"{host} was not checked before the connection")
        return [{**result, "port": port} for result in found]

    async def close(self) -> None:
        return None


async def checked_addresses(
    host: str, port: int, allowed_hosts: Collection[str]
) -> list[ResolveResult]:
    """Every address ``host`` resolves to, each one checked (unless the host is allowed)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise ToolError(f"the host {host} could not be resolved", hint="check the URL") from None
    results: list[ResolveResult] = []
    for family, _, proto, _, sockaddr in infos:
        text = str(sockaddr[0])
        address = ipaddress.ip_address(text.split("%")[0])
        reason = None if host.lower() in allowed_hosts else why_refused(address)
        if reason is not None:
            what = (
                f"{host} is {reason}" if text == host else f"{host} resolves to {address}, {reason}"
            )
            raise ToolError(what, hint=ALLOW_HINT)
        results.append(
            {
                "hostname": host,
                "host": text,
                "port": port,
                "family": family,
                "proto": proto,
                "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            }
        )
    if not results:
        raise ToolError(f"the host {host} has no address", hint="check the URL")
    return results


def _shown(url: URL) -> str:
    return shorten(str(url.with_user(None)), SHOWN_URL_CHARS)


def _parse(raw: str) -> URL:
    try:
        url = URL(raw.strip())
    except (ValueError, TypeError):
        raise ToolError("that is not a URL", hint="give a full http:// or https:// URL") from None
    if url.scheme not in ("http", "https"):
        given = f", not {url.scheme}:" if url.scheme else " (this one names no scheme)"
        raise ToolError(
            f"only http and https URLs can be fetched{given}",
            hint="give a full http:// or https:// URL",
        )
    if not url.raw_host:
        raise ToolError("the URL has no host", hint="give a full http:// or https:// URL")
    return url


def _redirected(url: URL, location: str) -> URL:
    """Where a redirect leads, checked like the first URL."""
    try:
        target = url.join(URL(location))
    except (ValueError, TypeError):
        raise ToolError(f"{_shown(url)} redirects to something that is not a URL") from None
    return _parse(str(target))


def _as_text(url: URL, response: aiohttp.ClientResponse, body: bytes, cut: bool) -> str:
    kind = response.content_type
    head = f"{_shown(url)} — {response.status} {response.reason or ''}".rstrip() + f", {kind}"
    charset = response.charset
    if kind in HTML_TYPES:
        text = html_to_text(body, charset=charset)
    elif kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml")):
        text = body.decode(_codec(charset), errors="replace")
    else:
        return f"{head}\n\n[{len(body):,} bytes of {kind}, not text: not shown]"
    note = f"\n\n[cut: only the first {len(body):,} bytes were read]" if cut else ""
    return f"{head}\n\n{text}{note}"


def _codec(charset: str | None) -> str:
    try:
        return codecs.lookup(charset or "utf-8").name
    except LookupError:
        return "utf-8"


async def _fetch(url: URL, ctx: ToolContext) -> str:
    settings = ctx.settings
    allowed = {host.lower() for host in settings.web_allow_hosts}
    resolver = CheckedResolver()
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=1)
    headers = {"User-Agent": USER_AGENT, "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}
    async with web_session(headers=headers, connector=connector) as session:
        for _ in range(MAX_REDIRECTS + 1):
            host = url.raw_host or ""
            port = url.explicit_port or (443 if url.scheme == "https" else 80)
            resolver.checked[host] = await checked_addresses(host, port, allowed)
            async with session.get(url, allow_redirects=False) as response:
                location = response.headers.get("Location")
                if response.status in REDIRECTS and location:
                    url = _redirected(url, location)
                    continue
                body, cut = await read_capped(response, settings.web_max_bytes)
                return _as_text(url, response, body, cut)
    raise ToolError(f"more than {MAX_REDIRECTS} redirects", hint="try the final address")


async def web_fetch(
    url: Annotated[str, Field(min_length=1, description="an http:// or https:// URL")],
    ctx: ToolContext,
) -> str:
    """Fetch a web page (public addresses only) and return it as readable text."""
    start = _parse(url)
    async with answered_within(
        _shown(start), ctx.settings.web_timeout, failed="could not be fetched"
    ):
        return await _fetch(start, ctx)


def web_fetch_tool() -> Tool:
    return make_tool(web_fetch, risk="guarded", groups=("group:network",))
