"""web_fetch reaches public addresses only — checked after resolution, at every redirect —
within its size and time caps, and returns HTML as readable text. (Its risk and who holds it:
tests/test_web_search.py, for both web tools.)"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from clawbot.messages import ToolCallBlock
from clawbot.routing.sessions import Session
from clawbot.settings import Settings
from clawbot.tools.html_text import html_to_text
from clawbot.tools.registry import ToolContext, ToolRegistry
from clawbot.tools.web import web_fetch_tool

from .standins.local_server import served

PAGE = """<!doctype html><html><head><title>Notes</title><style>p {color: red}</style>
<script>alert("never read")</script></head>
<body><h1>Shopping</h1><p>Buy <b>milk</b> and<br>bread.</p>
<ul><li>eggs</li><li>tea <i>(green)</i></li></ul><!-- a comment --></body></html>"""


@dataclass
class Server:
    port: int
    hits: list[str] = field(default_factory=list)
    redirect_to: str = ""
    hold: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    app = web.Application()
    found = Server(port=0)

    async def page(request: web.Request) -> web.StreamResponse:
        found.hits.append(request.path)
        if request.path == "/redirect":
            raise web.HTTPFound(found.redirect_to)
        if request.path == "/big":
            return web.Response(text="x" * 5000)
        if request.path == "/slow":
            await found.hold.wait()
        if request.path == "/image":
            return web.Response(body=b"\x89PNG" + bytes(100), content_type="image/png")
        return web.Response(text=PAGE, content_type="text/html")

    app.router.add_get("/{name}", page)
    async with served(app) as found.port:
        try:
            yield found
        finally:
            found.hold.set()  # a held fetch ends before the server does


async def fetch(url: str, **settings: Any) -> tuple[str, bool]:
    context = ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="main"),
        workspace=Path("."),
        settings=Settings(_env_file=None, **settings),  # type: ignore[call-arg]
    )
    call = ToolCallBlock(id="1", name="web_fetch", arguments={"url": url})
    result = await ToolRegistry([web_fetch_tool()]).execute(call, context)
    return result.content, result.is_error


def fake_dns(monkeypatch: pytest.MonkeyPatch, *answers: list[str]) -> list[str]:
    """Name look-ups answered from ``answers``, one list of addresses per call (the last
    repeats); returns the hosts asked for."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if not str(host).endswith(".test"):
            return real(host, port, *args, **kwargs)
        addresses = answers[min(len(asked), len(answers) - 1)]
        asked.append(str(host))
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))
            for address in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


async def test_a_loopback_host_is_refused_without_the_allow_setting(server: Server) -> None:
    content, is_error = await fetch(server.url("/page"))

    assert is_error
    assert content.startswith("error: 127.0.0.1 is a loopback address")
    assert "CLAWBOT_WEB_ALLOW_HOSTS" in content
    assert server.hits == []


async def test_a_host_named_in_the_allow_setting_is_fetched(server: Server) -> None:
    content, is_error = await fetch(server.url("/page"), web_allow_hosts="127.0.0.1")

    assert not is_error
    assert content.startswith(f"{server.url('/page')} — 200 OK, text/html\n\n# Notes")
    assert "Buy milk and" in content


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://172.16.0.1/",
        "http://100.64.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://224.0.0.1/",
        "http://240.0.0.1/",
        "http://0.0.0.0/",
        "http://[::1]/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
async def test_private_link_local_multicast_and_reserved_addresses_are_refused(url: str) -> None:
    content, is_error = await fetch(url, web_timeout=5)

    assert is_error
    assert content.startswith("error: ") and "address" in content
    assert "did not answer" not in content  # refused before any connection was tried


async def test_a_name_resolving_to_a_private_address_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_dns(monkeypatch, ["10.0.0.7"])

    content, is_error = await fetch("http://intranet.test/")

    assert is_error
    assert content.startswith("error: intranet.test resolves to 10.0.0.7, a private address")


async def test_every_address_a_name_resolves_to_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_dns(monkeypatch, ["93.184.216.34", "127.0.0.1"])

    content, is_error = await fetch("http://mixed.test/")

    assert is_error
    assert "resolves to 127.0.0.1, a loopback address" in content


async def test_the_connection_goes_to_the_address_that_was_checked(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = fake_dns(monkeypatch, ["127.0.0.1"], ["10.255.255.1"])  # a second answer differs

    content, is_error = await fetch(
        f"http://rebind.test:{server.port}/page", web_allow_hosts="rebind.test", web_timeout=5
    )

    assert not is_error, content
    assert "Buy milk" in content
    assert asked == ["rebind.test"]


async def test_redirects_are_followed(server: Server) -> None:
    server.redirect_to = "/page"

    content, is_error = await fetch(server.url("/redirect"), web_allow_hosts="127.0.0.1")

    assert not is_error
    assert content.startswith(f"{server.url('/page')} — 200 OK")
    assert server.hits == ["/redirect", "/page"]


async def test_a_redirect_to_a_loopback_host_not_allowed_is_refused(server: Server) -> None:
    server.redirect_to = server.url("/page", host="localhost")

    content, is_error = await fetch(server.url("/redirect"), web_allow_hosts="127.0.0.1")

    assert is_error
    assert content.startswith("error: localhost resolves to")
    assert server.hits == ["/redirect"]


async def test_a_redirect_to_a_private_address_is_refused(server: Server) -> None:
    server.redirect_to = "http://10.0.0.1/admin"

    content, is_error = await fetch(
        server.url("/redirect"), web_allow_hosts="127.0.0.1", web_timeout=5
    )

    assert is_error
    assert content.startswith("error: 10.0.0.1 is a private address")


async def test_a_redirect_to_another_scheme_is_refused(server: Server) -> None:
    server.redirect_to = "file:///etc/passwd"

    content, is_error = await fetch(server.url("/redirect"), web_allow_hosts="127.0.0.1")

    assert is_error
    assert content.startswith("error: only http and https URLs can be fetched, not file:")


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/", "example.com"]
)
async def test_a_url_that_is_not_http_or_https_is_refused(url: str) -> None:
    content, is_error = await fetch(url)

    assert is_error
    assert content.startswith("error: only http and https URLs can be fetched")


async def test_a_body_over_the_size_cap_is_cut(server: Server) -> None:
    content, is_error = await fetch(
        server.url("/big"), web_allow_hosts="127.0.0.1", web_max_bytes=1000
    )

    assert not is_error
    assert content.endswith("x" * 1000 + "\n\n[cut: only the first 1,000 bytes were read]")
    assert "x" * 1001 not in content


async def test_a_server_slower_than_the_timeout_is_given_up(server: Server) -> None:
    content, is_error = await fetch(
        server.url("/slow"), web_allow_hosts="127.0.0.1", web_timeout=0.3
    )

    assert is_error
    assert content.startswith(f"error: {server.url('/slow')} did not answer within 0.3 s")


async def test_html_is_returned_as_readable_text(server: Server) -> None:
    content, _ = await fetch(server.url("/page"), web_allow_hosts="127.0.0.1")

    assert content.split("\n\n", 1)[1] == (
        "# Notes\n\n# Shopping\n\nBuy milk and\nbread.\n\n- eggs\n- tea (green)"
    )


async def test_content_that_is_not_text_is_described_not_shown(server: Server) -> None:
    content, is_error = await fetch(server.url("/image"), web_allow_hosts="127.0.0.1")

    assert not is_error
    assert content.endswith("[104 bytes of image/png, not text: not shown]")


def test_html_text_drops_scripts_styles_and_comments() -> None:
    text = html_to_text(PAGE)

    assert "alert" not in text and "color" not in text and "comment" not in text
