"""A local Slack: the Web API methods clawbot uses, Socket Mode over a websocket, and Events API
HTTP delivery, on 127.0.0.1. The real slack-bolt / slack-sdk run against it unmodified.

Wire format follows Slack's documentation: Web API answers ``{"ok": ...}`` JSON (HTTP 200 even for
API errors, 429 + ``Retry-After`` when rate limited); Socket Mode sends ``hello`` then
``events_api`` envelopes and expects ``{"envelope_id": ...}`` acks; HTTP mode posts
``event_callback`` bodies signed with ``v0`` HMAC-SHA256 of the signing secret.

Slack has no typing indicator a bot can send (the RTM ``typing`` event is gone); the only
"working on it" signal is ``assistant.threads.setStatus`` for AI-assistant apps. The stand-in
records calls to that method as typing events, so ``typing_events()`` honestly reports what the
adapter did: nothing, for a regular bot.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web

from clawbot.channels import Adapter
from tests.standins.harness import SentRecord

BOT_TOKEN = "xoxb-1111-2222-standinbottoken"
APP_TOKEN = "xapp-1-A0001-3333-standinapptoken"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM_ID = "T0001"
APP_ID = "A0001"
BOT_USER_ID = "UBOT0001"
BOT_ID = "BBOT0001"


@dataclass
class StandInFile:
    """A file uploaded to the stand-in, downloadable through ``url_private_download``."""

    id: str
    name: str
    mimetype: str
    content: bytes


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1, for servers whose settings cannot say "port 0"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def sign_request(body: bytes, timestamp: str, secret: str) -> str:
    """Slack's ``X-Slack-Signature``: ``v0=`` + HMAC-SHA256 over ``v0:{timestamp}:{body}``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class SlackStandIn:
    """The server side: Web API, Socket Mode websocket, and file downloads."""

    def __init__(self) -> None:
        self.bot_token = BOT_TOKEN
        self.app_token = APP_TOKEN
        self.signing_secret = SIGNING_SECRET
        self.posted: list[SentRecord] = []
        self.api_calls: list[tuple[str, dict[str, Any]]] = []
        self.typing: list[str] = []
        self.files: dict[str, StandInFile] = {}
        self.connections_opened = 0
        self._fail_queue: list[tuple[int, float]] = []
        self._reject_formatting: list[str] = []
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._socket_changed = asyncio.Event()
        self._acks: dict[str, asyncio.Event] = {}
        self._posted_changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/api/"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self._socket_mode)
        app.router.add_get("/files-pri/{file_id}/{name}", self._download)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- test controls -------------------------------------------------------------------------

    def next_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def add_file(self, name: str, content: bytes, mimetype: str = "text/plain") -> dict[str, Any]:
        """Store a file and return its Slack file object, as it appears in a message's ``files``."""
        file_id = f"F{next(self._ids):07d}"
        self.files[file_id] = StandInFile(file_id, name, mimetype, content)
        return self._file_object(self.files[file_id])

    def fail_next_sends(self, count: int, status: int, retry_after: float) -> None:
        self._fail_queue.extend([(status, retry_after)] * count)

    def reject_formatting_next(self, error: str = "invalid_blocks") -> None:
        self._reject_formatting.append(error)

    async def wait_connected(self, timeout: float = 5.0) -> web.WebSocketResponse:
        """The newest open Socket Mode connection, waiting for one if there is none yet."""
        async with asyncio.timeout(timeout):
            while True:
                live = [ws for ws in self._sockets if not ws.closed]
                if live:
                    return live[-1]
                self._socket_changed.clear()
                await self._socket_changed.wait()

    async def drop_connections(self) -> None:
        """Close every Socket Mode websocket, as a network loss or a Slack-side restart does."""
        for ws in list(self._sockets):
            await ws.close()

    async def push_envelope(
        self, body: dict[str, Any], *, retry_attempt: int = 0, timeout: float = 5.0
    ) -> str:
        """Send an ``events_api`` envelope over Socket Mode and wait for the client's ack."""
        ws = await self.wait_connected(timeout)
        envelope_id = f"env-{next(self._ids)}"
        acked = self._acks[envelope_id] = asyncio.Event()
        await ws.send_json(
            {
                "envelope_id": envelope_id,
                "payload": body,
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": retry_attempt,
                "retry_reason": "timeout" if retry_attempt else "",
            }
        )
        async with asyncio.timeout(timeout):
            await acked.wait()
        return envelope_id

    async def wait_posted(self, count: int, timeout: float) -> list[SentRecord]:
        async with asyncio.timeout(timeout):
            while len(self.posted) < count:
                self._posted_changed.clear()
                await self._posted_changed.wait()
        return list(self.posted)

    # -- Web API -------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            raw = await request.read()
            if request.content_type == "application/json":
                args.update(json.loads(raw or b"{}"))
            else:
                args.update(parse_qsl(raw.decode()))
        token = _bearer(request) or args.pop("token", None)
        self.api_calls.append((method, args))
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if token is None:
            return _ok_false("not_authed")
        if token != expected:
            wrong_kind = token in (self.app_token, self.bot_token)
            return _ok_false("not_allowed_token_type" if wrong_kind else "invalid_auth")
        handler = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "chat.postMessage": self._post_message,
            "files.info": self._files_info,
            "assistant.threads.setStatus": self._set_status,
        }.get(method)
        if handler is None:
            return _ok_false("unknown_method", status=404)
        return handler(args)

    def _auth_test(self, args: dict[str, Any]) -> web.Response:
        return web.json_response(
            {
                "ok": True,
                "url": "https://standin.slack.com/",
                "team": "Stand-in",
                "user": "clawbot",
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "bot_id": BOT_ID,
                "is_enterprise_install": False,
            }
        )

    def _connections_open(self, args: dict[str, Any]) -> web.Response:
        ticket = f"ticket-{next(self._ids)}"
        self._tickets.add(ticket)
        self.connections_opened += 1
        return web.json_response(
            {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}"}
        )

    def _post_message(self, args: dict[str, Any]) -> web.Response:
        channel = str(args.get("channel") or "")
        text = str(args.get("text") or "")
        if not channel:
            return _ok_false("channel_not_found")
        if not text and not args.get("blocks"):
            return _ok_false("no_text")
        if self._fail_queue:
            status, retry_after = self._fail_queue.pop(0)
            error = "ratelimited" if status == 429 else "internal_error"
            return _ok_false(error, status=status, headers={"Retry-After": f"{retry_after:g}"})
        formatted = _truthy(args.get("mrkdwn", True))
        if formatted and self._reject_formatting:
            return _ok_false(self._reject_formatting.pop(0))
        if len(text) > 40_000:
            return _ok_false("msg_too_long")
        ts = self.next_ts()
        thread_ts = args.get("thread_ts") or None
        self.posted.append(
            SentRecord(
                chat_id=channel,
                text=text,
                thread_id=str(thread_ts) if thread_ts else None,
                formatted=formatted,
                message_id=ts,
                raw=dict(args),
            )
        )
        self._posted_changed.set()
        message = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
        return web.json_response({"ok": True, "channel": channel, "ts": ts, "message": message})

    def _files_info(self, args: dict[str, Any]) -> web.Response:
        stored = self.files.get(str(args.get("file", "")))
        if stored is None:
            return _ok_false("file_not_found")
        return web.json_response({"ok": True, "file": self._file_object(stored)})

    def _set_status(self, args: dict[str, Any]) -> web.Response:
        self.typing.append(str(args.get("channel_id", "")))
        return web.json_response({"ok": True})

    def _file_object(self, stored: StandInFile) -> dict[str, Any]:
        url = f"{self.base_url}/files-pri/{TEAM_ID}-{stored.id}/{stored.name}"
        return {
            "id": stored.id,
            "name": stored.name,
            "title": stored.name,
            "mimetype": stored.mimetype,
            "filetype": stored.name.rsplit(".", 1)[-1],
            "size": len(stored.content),
            "url_private": url,
            "url_private_download": url + "?download=1",
            "mode": "hosted",
        }

    async def _download(self, request: web.Request) -> web.Response:
        if _bearer(request) != self.bot_token:
            # Slack answers an unauthenticated file URL with its sign-in page, not the bytes.
            return web.Response(status=200, text="<html>sign in</html>", content_type="text/html")
        file_id = request.match_info["file_id"].removeprefix(f"{TEAM_ID}-")
        stored = self.files.get(file_id)
        if stored is None:
            raise web.HTTPNotFound()
        return web.Response(body=stored.content, content_type=stored.mimetype)

    # -- Socket Mode ---------------------------------------------------------------------------

    async def _socket_mode(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            raise web.HTTPUnauthorized()
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets) + 1,
                "debug_info": {"host": "standin", "approximate_connection_time": 3600},
                "connection_info": {"app_id": APP_ID},
            }
        )
        self._sockets.append(ws)
        self._socket_changed.set()
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    data = json.loads(msg.data)
                except ValueError:
                    continue
                acked = self._acks.pop(str(data.get("envelope_id")), None)
                if acked is not None:
                    acked.set()
        finally:
            self._sockets.remove(ws)
            self._socket_changed.set()
        return ws


class SlackHarness:
    """PlatformHarness for Slack: the stand-in plus the real SlackAdapter pointed at it.

    ``mode="socket"`` delivers events over Socket Mode; ``mode="http"`` posts signed Events API
    requests to the adapter's own HTTP endpoint. Mentions arrive twice, as Slack sends them to an
    app subscribed to both ``message.*`` and ``app_mention``.
    """

    channel = "slack"
    max_message_chars = 4000
    bot_user_id = BOT_USER_ID

    def __init__(self, mode: Literal["socket", "http"] = "socket") -> None:
        self.mode = mode
        self.standin = SlackStandIn()
        self.http_url = ""
        self._http: aiohttp.ClientSession | None = None
        self._authors: dict[tuple[str, str], str] = {}
        self._deliveries: dict[str, int] = {}

    async def start(self) -> None:
        await self.standin.start()
        self._http = aiohttp.ClientSession()

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
        await self.standin.stop()

    def make_adapter(self, **overrides: Any) -> Adapter:
        from adapters.slack import SlackAdapter
        from clawbot.settings import Settings

        values: dict[str, Any] = {
            "slack_bot_token": self.standin.bot_token,
            "slack_app_token": self.standin.app_token,
            "slack_signing_secret": self.standin.signing_secret,
            "slack_api_base": self.standin.api_base,
            "slack_mode": self.mode,
            "slack_http_host": "127.0.0.1",
            "slack_http_port": free_port(),
            "slack_http_path": "/slack/events",
        }
        values.update(overrides)
        settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
        self.http_url = f"http://{settings.slack_http_host}:{settings.slack_http_port}{settings.slack_http_path}"
        return SlackAdapter.from_settings(settings)

    async def inject_message(
        self,
        text: str,
        *,
        chat_type: Literal["dm", "group"] = "dm",
        sender_id: str = "1001",
        sender_name: str = "Ann",
        chat_id: str | None = None,
        mention: bool = False,
        thread_id: str | None = None,
        reply_to_bot: bool = False,
        from_bot: bool = False,
        from_self: bool = False,
        message_id: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> str:
        """Deliver a user's message as Slack would; ``files`` come from ``standin.add_file``."""
        chat = chat_id or (f"D{sender_id}" if chat_type == "dm" else "C0GENERAL")
        ts = message_id or self.standin.next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "channel": chat,
            "channel_type": "im" if chat_type == "dm" else "channel",
            "text": f"<@{BOT_USER_ID}> {text}" if mention else text,
            "ts": ts,
            "event_ts": ts,
            "team": TEAM_ID,
        }
        if from_self:
            event.update(user=BOT_USER_ID, bot_id=BOT_ID, app_id=APP_ID)
            event["bot_profile"] = {"id": BOT_ID, "name": "clawbot", "app_id": APP_ID}
        elif from_bot:
            event.update(user=sender_id, bot_id=f"B{sender_id}", app_id="AOTHER")
            event["bot_profile"] = {"id": f"B{sender_id}", "name": sender_name}
        else:
            event["user"] = sender_id
            event["user_profile"] = {
                "display_name": sender_name,
                "real_name": sender_name,
                "name": sender_name.lower(),
            }
        if reply_to_bot:
            parent = thread_id or self._last_bot_message(chat)
            event.update(thread_ts=parent, parent_user_id=BOT_USER_ID)
        elif thread_id:
            event.update(thread_ts=thread_id, parent_user_id=self._authors.get((chat, thread_id)))
            if event["parent_user_id"] is None:
                del event["parent_user_id"]
        if files:
            event["files"] = files
            event["subtype"] = "file_share"
        self._authors[(chat, ts)] = str(event["user"])

        await self._deliver(event)
        if mention and chat_type == "group":
            mention_event = {k: v for k, v in event.items() if k != "channel_type"}
            mention_event["type"] = "app_mention"
            await self._deliver(mention_event)
        return ts

    async def deliver_raw(self, event: Mapping[str, Any]) -> None:
        """Deliver an arbitrary (possibly malformed) event as an ``event_callback``."""
        await self._deliver(dict(event))

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[SentRecord]:
        return await self.standin.wait_posted(count, timeout)

    def sent(self) -> list[SentRecord]:
        return list(self.standin.posted)

    def fail_next_sends(self, count: int = 1, *, status: int = 429, retry_after: float = 0) -> None:
        self.standin.fail_next_sends(count, status, retry_after)

    def reject_formatting_next(self) -> None:
        self.standin.reject_formatting_next()

    def typing_events(self) -> list[str]:
        """Always empty for a regular bot: Slack gives bots no typing indicator (module doc)."""
        return list(self.standin.typing)

    def _last_bot_message(self, chat: str) -> str:
        for record in reversed(self.standin.posted):
            if record.chat_id == chat:
                return record.message_id
        ts = self.standin.next_ts()
        self._authors[(chat, ts)] = BOT_USER_ID
        return ts

    async def _deliver(self, event: dict[str, Any]) -> None:
        key = f"{event.get('channel')}:{event.get('ts')}:{event.get('type')}"
        attempt = self._deliveries.get(key, -1) + 1
        self._deliveries[key] = attempt
        body = {
            "token": "legacy-verification-token",
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": "Ev" + hashlib.sha1(key.encode()).hexdigest()[:10].upper(),
            "event_time": int(time.time()),
            "authorizations": [
                {"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True, "enterprise_id": None}
            ],
            "is_ext_shared_channel": False,
        }
        if self.mode == "socket":
            await self.standin.push_envelope(body, retry_attempt=attempt)
            return
        status, _ = await self.post_signed(body, retry_num=attempt)
        if status != 200:
            raise AssertionError(f"the adapter answered HTTP {status} to an event")

    async def post_signed(
        self, body: Mapping[str, Any], *, retry_num: int = 0, secret: str | None = None
    ) -> tuple[int, str]:
        """POST an Events API request to the adapter, signed like Slack signs it."""
        assert self._http is not None, "harness not started"
        raw = json.dumps(body).encode()
        timestamp = str(int(time.time()))
        signature = sign_request(raw, timestamp, secret or self.standin.signing_secret)
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature,
        }
        if retry_num:
            headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "timeout"})
        async with self._http.post(self.http_url, data=raw, headers=headers) as resp:
            return resp.status, await resp.text()


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None


def _truthy(value: Any) -> bool:
    return value not in (False, "false", "False", "0", 0)


def _ok_false(
    error: str, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response({"ok": False, "error": error}, status=status, headers=headers)
