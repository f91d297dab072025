"""A local Slack: the Web API methods clawbot uses, Socket Mode over a websocket, and Events API
HTTP delivery, on 127.0.0.1. The real slack-bolt / slack-sdk run against it unmodified.

Wire format follows Slack's documentation: Web API answers ``{"ok": ...}`` JSON (HTTP 200 even for
API errors, 429 + ``Retry-After`` when rate limited); Socket Mode sends ``hello`` then
``events_api`` / ``slash_commands`` envelopes and expects ``{"envelope_id": ...}`` acks; HTTP
mode posts ``event_callback`` bodies (JSON) and slash commands (form-encoded), signed with ``v0``
HMAC-SHA256 of the signing secret.

Acknowledgement is modelled as strictly as Slack applies it (:class:`EventSender`):

* HTTP: an event not answered 2xx within ``ack_timeout`` (3 s) — a timeout, an error status or a
  refused connection — is sent again, up to 3 retries (nearly at once, after 1 minute, after 5
  minutes; ``retry_delays``), with ``X-Slack-Retry-Num`` / ``X-Slack-Retry-Reason``.
* Socket Mode: an envelope not acked within ``ack_timeout``, or whose connection closed before
  the ack, is sent again with ``retry_attempt`` / ``retry_reason`` on the next open connection
  (after a reconnect if none is open), on the same schedule. A late ack counts for nothing.
* Slash commands are never retried: unanswered in 3 s, the user sees an error.
* Button presses (``block_actions`` interactions) are like slash commands: sent once, as an
  ``interactive`` envelope in Socket Mode or a form-encoded ``payload`` POST to the Request URL in
  HTTP mode; unanswered in 3 s, the presser sees an error and nothing is retried.
  ``chat.postMessage`` checks ``blocks`` as Slack does (``invalid_blocks``); ``chat.update``
  replaces a message's text and blocks (``message_not_found`` once it is deleted);
  ``chat.delete`` deletes a message of the bot's.
* Both carry a ``response_url`` served here: what the app posts to it (an ephemeral answer to
  that one person, by default) is kept in ``responses``.
* ``chat.postEphemeral`` shows a message to one ``user`` in a channel, and keeps nothing: it is
  kept in ``ephemeral``, apart from the channel's messages (``posted``).

Rate limits (:data:`SLACK_RATES`, on by default): ``chat.postMessage`` has a per-channel budget
and ``chat.update`` a workspace-wide one; a call over budget is answered HTTP 429 with
``{"ok": false, "error": "ratelimited"}`` and a ``Retry-After`` header in whole seconds.
``chat.update`` refuses a text over 40,000 characters (``msg_too_long``), as
``chat.postMessage`` does. ``book`` counts each channel's messages, edits and refusals and the
calls that did not wait as long as asked; ``chat_shows`` is what a channel shows in the end.

Messages carry no ``user_profile`` (Slack's documented message events do not): the app learns
names from ``users.info``, which serves the people the harness has seen.

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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlencode

import aiohttp
from aiohttp import web

from clawbot.channels.harness import SentRecord
from clawbot.channels.interface import Adapter
from tests.standins.rate_rules import Limit, RateBook, TokenBucket

from .slack_uploads import MAX_UPLOAD_BYTES, SlackUploads
from .uploads import ReceivedFile

BOT_TOKEN = "xoxb-1111-2222-standinbottoken"
APP_TOKEN = "xapp-1-A0001-3333-standinapptoken"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM_ID = "T0001"
APP_ID = "A0001"
BOT_USER_ID = "UBOT0001"
BOT_ID = "BBOT0001"
ACK_TIMEOUT = 3.0
"""Seconds Slack waits for an HTTP 2xx or a Socket Mode ack."""
RETRY_DELAYS = (0.0, 60.0, 300.0)
"""Slack's Events API retries: nearly at once, after 1 minute, after 5 minutes."""

Mode = Literal["socket", "http"]

MAX_TEXT_CHARS = 40_000
"""chat.postMessage: "Slack will truncate messages containing more than 40,000 characters";
beyond that the API answers ``msg_too_long``."""
POSTS_PER_CHANNEL = TokenBucket(per_second=1.0, burst=3)
UPDATES_PER_WORKSPACE = TokenBucket(per_second=50 / 60, burst=5)


@dataclass(frozen=True)
class SlackRates:
    """Slack's limits on what clawbot calls, from its rate-limit page (docs.slack.dev/apis/
    web-api/rate-limits): ``chat.postMessage`` "generally allows posting one message per
    second per channel" ("Posting messages: 1 per second. Short bursts >1 allowed"; bursts of
    3 here); ``chat.update`` is Tier 3, "50+ per minute" per method per workspace per app,
    where "sporadic bursts are welcome" (5 here). Over a limit Slack answers HTTP 429 with a
    ``Retry-After`` header: "the number of seconds until you can retry"."""

    post: Limit = POSTS_PER_CHANNEL
    update: Limit = UPDATES_PER_WORKSPACE
    delete: Limit = UPDATES_PER_WORKSPACE
    """``chat.delete`` is Tier 3 too, a budget of its own (limits are per method)."""


SLACK_RATES = SlackRates()


@dataclass
class StandInFile:
    """A file uploaded to the stand-in, downloadable through ``url_private_download``."""

    id: str
    name: str
    mimetype: str
    content: bytes
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields of its file object beyond the common ones (an audio clip's)."""


@dataclass(frozen=True)
class Attempt:
    """One try at handing a delivery to the app: its retry number and what came of it."""

    number: int
    outcome: Literal["acked", "timeout", "http_error", "connection_failed", "connection_lost"]
    status: int | None = None


@dataclass
class Delivery:
    """An event or slash command on its way to the app, with every attempt Slack made."""

    kind: Literal["event", "command", "interaction"]
    body: dict[str, Any]
    attempts: list[Attempt] = field(default_factory=list)
    response: Any = None
    """What the acknowledgement carried (a slash command's response payload or body)."""
    gave_up: bool = False
    on_wire: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the first attempt was sent to the app."""
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def acked(self) -> bool:
        return any(a.outcome == "acked" for a in self.attempts)

    async def wait(self, timeout: float) -> Delivery:
        """Wait until the app acknowledged it; an AssertionError if Slack gave up on it."""
        async with asyncio.timeout(timeout):
            await self.finished.wait()
        if not self.acked:
            raise AssertionError(f"the app never acknowledged the {self.kind}: {self.attempts}")
        return self


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


def signed_headers(raw: bytes, content_type: str, secret: str) -> dict[str, str]:
    timestamp = str(int(time.time()))
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": sign_request(raw, timestamp, secret),
    }


class SlackStandIn:
    """The server side: Web API, Socket Mode websocket, file downloads and uploads
    (:attr:`uploads`, ``tests.standins.slack_uploads``), and (through :attr:`sender`)
    delivery of events and slash commands under Slack's acknowledgement rules."""

    def __init__(self) -> None:
        self.bot_token = BOT_TOKEN
        self.app_token = APP_TOKEN
        self.signing_secret = SIGNING_SECRET
        self.posted: list[SentRecord] = []
        self.updates: dict[tuple[str, str], dict[str, Any]] = {}
        """The last ``chat.update`` of each message the bot updated: (channel, ts) -> args."""
        self.deleted: set[tuple[str, str]] = set()
        self.responses: list[dict[str, Any]] = []
        """What the app posted to a slash command's or button press's ``response_url``."""
        self.ephemeral: list[SentRecord] = []
        """Messages ``chat.postEphemeral`` showed one person (``raw["user"]``)."""
        self.api_calls: list[tuple[str, dict[str, Any]]] = []
        self.on_call: Callable[[str, dict[str, Any]], None] | None = None
        """Told each Web API call (method, arguments) as it arrives, on the server's loop."""
        self.typing: list[str] = []
        self.files: dict[str, StandInFile] = {}
        self.downloads_held: asyncio.Event | None = None
        """While set to an unset event, file downloads wait for it (a slow file server)."""
        self.users: dict[str, dict[str, Any]] = {}
        self.users_info_error: str | None = None
        """When set, ``users.info`` answers this error (e.g. ``missing_scope``)."""
        self.connections_opened = 0
        self.sender = EventSender(self)
        self.uploads = SlackUploads(self)
        self._fail_queue: list[tuple[int, float]] = []
        self.rates = SLACK_RATES
        self.book = RateBook(resolution=1.0)  # Retry-After is whole seconds
        self._reject_formatting: list[str] = []
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._socket_changed = asyncio.Event()
        self._posted_changed = asyncio.Event()
        self._responded = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/api/"

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_UPLOAD_BYTES + 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/v1/{ticket}", self.uploads.receive)
        app.router.add_get("/link/", self._socket_mode)
        app.router.add_get("/files-pri/{file_id}/{name}", self._download)
        app.router.add_post("/commands/{id}", self._response_url)
        app.router.add_post("/actions/{id}", self._response_url)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        await self.sender.stop()
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- test controls -------------------------------------------------------------------------

    def next_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):07d}"

    def add_file(self, name: str, content: bytes, mimetype: str = "text/plain") -> dict[str, Any]:
        """Store a file and return its Slack file object, as it appears in a message's ``files``."""
        file_id = self.new_id("F")
        self.files[file_id] = StandInFile(file_id, name, mimetype, content)
        return self._file_object(self.files[file_id])

    def add_audio_clip(self, content: bytes, *, duration_ms: int) -> dict[str, Any]:
        """An audio clip recorded in Slack (its file object as Slack describes a clip)."""
        file_id = self.new_id("F")
        extra = {
            "subtype": "slack_audio",
            "duration_ms": duration_ms,
            "media_display_type": "audio",
        }
        name = f"audio_message_{file_id}.webm"
        self.files[file_id] = StandInFile(file_id, name, "audio/webm", content, extra)
        return self._file_object(self.files[file_id])

    def delete_file(self, file_id: str) -> None:
        """Someone deleted the file: ``files.info`` says ``file_not_found``, its URL 404s."""
        del self.files[file_id]

    def add_user(self, user_id: str, real_name: str, display_name: str | None = None) -> None:
        """A member of the workspace, as ``users.info`` describes them."""
        display = real_name if display_name is None else display_name
        self.users[user_id] = {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": real_name.lower().replace(" ", "."),
            "deleted": False,
            "real_name": real_name,
            "is_bot": False,
            "profile": {
                "real_name": real_name,
                "real_name_normalized": real_name,
                "display_name": display,
                "display_name_normalized": display,
            },
        }

    def users_info_calls(self) -> list[str]:
        return [str(args.get("user")) for method, args in self.api_calls if method == "users.info"]

    def fail_next_sends(self, count: int, status: int, retry_after: float) -> None:
        self._fail_queue.extend([(status, retry_after)] * count)

    def reject_formatting_next(self, error: str = "invalid_blocks") -> None:
        self._reject_formatting.append(error)

    def live_sockets(self) -> list[web.WebSocketResponse]:
        return [ws for ws in self._sockets if not ws.closed]

    async def wait_connected(self, timeout: float | None = 5.0) -> web.WebSocketResponse:
        """The newest open Socket Mode connection, waiting for one if there is none yet."""
        async with asyncio.timeout(timeout):
            while True:
                live = self.live_sockets()
                if live:
                    return live[-1]
                self._socket_changed.clear()
                await self._socket_changed.wait()

    async def drop_connections(self) -> None:
        """Close every Socket Mode websocket, as a network loss or a Slack-side restart does."""
        for ws in list(self._sockets):
            await ws.close()

    async def wait_posted(self, count: int, timeout: float) -> list[SentRecord]:
        async with asyncio.timeout(timeout):
            while len(self.posted) < count:
                self._posted_changed.clear()
                await self._posted_changed.wait()
        return list(self.posted)

    async def wait_responses(self, count: int, timeout: float) -> list[dict[str, Any]]:
        async with asyncio.timeout(timeout):
            while len(self.responses) < count:
                self._responded.clear()
                await self._responded.wait()
        return list(self.responses)

    async def _response_url(self, request: web.Request) -> web.Response:
        """A ``response_url``: Slack takes a JSON message and answers ``ok`` as plain text."""
        self.responses.append(dict(json.loads(await request.read() or b"{}")))
        self._responded.set()
        return web.Response(text="ok")

    # -- rate limits and what a channel shows ---------------------------------------------------

    def _over_limit(self, method: str, channel: str, key: str, limit: Limit) -> web.Response | None:
        """Slack's answer to a call over ``limit``: 429, ``ratelimited``, ``Retry-After``."""
        refusal = self.book.admit(channel, [(key, limit)], scope=method)
        if refusal is None:
            return None
        headers = {"Retry-After": f"{refusal.retry_after:g}"}  # whole seconds, as rounded
        return _ok_false("ratelimited", status=429, headers=headers)

    def chat_shows(self, channel: str) -> list[str]:
        """The texts of the bot's messages in a channel, oldest first, as they show now."""
        shown = []
        for record in self.posted:
            key = (record.chat_id, record.message_id)
            if record.chat_id != channel or key in self.deleted:
                continue
            update = self.updates.get(key)
            shown.append(str(update.get("text") or "") if update is not None else record.text)
        return shown

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
        if self.on_call is not None:
            self.on_call(method, args)
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
            "chat.postEphemeral": self._post_ephemeral,
            "chat.update": self._update_message,
            "chat.delete": self._delete_message,
            "files.info": self._files_info,
            "files.getUploadURLExternal": self.uploads.get_upload_url,
            "files.completeUploadExternal": self.uploads.complete,
            "users.info": self._users_info,
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
        if isinstance(args.get("blocks"), str):
            args["blocks"] = json.loads(args["blocks"])
        if "blocks" in args and not _valid_blocks(args["blocks"]):
            return _ok_false("invalid_blocks")
        if self._fail_queue:
            status, retry_after = self._fail_queue.pop(0)
            error = "ratelimited" if status == 429 else "internal_error"
            return _ok_false(error, status=status, headers={"Retry-After": f"{retry_after:g}"})
        over = self._over_limit("chat.postMessage", channel, channel, self.rates.post)
        if over is not None:
            return over
        formatted = _truthy(args.get("mrkdwn", True))
        if formatted and self._reject_formatting:
            return _ok_false(self._reject_formatting.pop(0))
        if len(text) > MAX_TEXT_CHARS:
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
        self.book.record(channel, "message")
        self._posted_changed.set()
        message = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
        return web.json_response({"ok": True, "channel": channel, "ts": ts, "message": message})

    def _post_ephemeral(self, args: dict[str, Any]) -> web.Response:
        """As Slack: a channel, a user and a text (or blocks) are required; the answer names
        the ``message_ts`` of a message nobody else sees and that is not stored."""
        channel, user = str(args.get("channel") or ""), str(args.get("user") or "")
        text = str(args.get("text") or "")
        if not channel:
            return _ok_false("channel_not_found")
        if not user:
            return _ok_false("user_not_found")
        if not text and not args.get("blocks"):
            return _ok_false("no_text")
        thread_ts = args.get("thread_ts") or None
        self.ephemeral.append(
            SentRecord(
                chat_id=channel,
                text=text,
                thread_id=str(thread_ts) if thread_ts else None,
                formatted=_truthy(args.get("mrkdwn", True)),
                raw=dict(args),
            )
        )
        self._posted_changed.set()
        return web.json_response({"ok": True, "message_ts": self.next_ts()})

    def _update_message(self, args: dict[str, Any]) -> web.Response:
        """As Slack: the bot's own message that still exists; ``blocks`` replace the old ones
        (checked as for a post); a text over 40,000 characters is ``msg_too_long``; an update
        that changes nothing is accepted."""
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        key = (channel, ts)
        if not any((r.chat_id, r.message_id) == key for r in self.posted) or key in self.deleted:
            return _ok_false("message_not_found")
        over = self._over_limit("chat.update", channel, TEAM_ID, self.rates.update)
        if over is not None:
            return over
        if isinstance(args.get("blocks"), str):
            args["blocks"] = json.loads(args["blocks"])
        if "blocks" in args and not _valid_blocks(args["blocks"]):
            return _ok_false("invalid_blocks")
        text = str(args.get("text") or "")
        if not text and not args.get("blocks"):
            return _ok_false("no_text")
        if len(text) > MAX_TEXT_CHARS:
            return _ok_false("msg_too_long")
        self.updates[key] = dict(args)
        self.book.record(channel, "edit")
        self._posted_changed.set()
        message = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": text}
        return web.json_response(
            {"ok": True, "channel": channel, "ts": ts, "text": text, "message": message}
        )

    def _delete_message(self, args: dict[str, Any]) -> web.Response:
        """As Slack: the bot's own message that still exists (``message_not_found`` once it
        is gone, or for any message the bot did not post)."""
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        key = (channel, ts)
        if not any((r.chat_id, r.message_id) == key for r in self.posted) or key in self.deleted:
            return _ok_false("message_not_found")
        over = self._over_limit("chat.delete", channel, TEAM_ID, self.rates.delete)
        if over is not None:
            return over
        self.deleted.add(key)
        self.book.record(channel, "delete")
        self._posted_changed.set()
        return web.json_response({"ok": True, "channel": channel, "ts": ts})

    def _users_info(self, args: dict[str, Any]) -> web.Response:
        if self.users_info_error is not None:
            return _ok_false(self.users_info_error)
        user = self.users.get(str(args.get("user") or ""))
        if user is None:
            return _ok_false("user_not_found")
        return web.json_response({"ok": True, "user": user})

    def _files_info(self, args: dict[str, Any]) -> web.Response:
        stored = self.files.get(str(args.get("file", "")))
        if stored is None:
            return _ok_false("file_not_found")
        return web.json_response({"ok": True, "file": self._file_object(stored)})

    def _set_status(self, args: dict[str, Any]) -> web.Response:
        self.typing.append(str(args.get("channel_id", "")))
        return web.json_response({"ok": True})

    def _file_object(self, stored: StandInFile) -> dict[str, Any]:
        url = f"{self.base_url}/files-pri/{TEAM_ID}-{stored.id}/{quote(stored.name, safe='')}"
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
            **stored.extra,
        }

    async def _download(self, request: web.Request) -> web.Response:
        if self.downloads_held is not None:
            await self.downloads_held.wait()
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
                if isinstance(data, dict):
                    self.sender.acknowledged(str(data.get("envelope_id")), data.get("payload"))
        finally:
            self._sockets.remove(ws)
            self._socket_changed.set()
            self.sender.connection_closed(ws)
        return ws


class EventSender:
    """Slack's side of delivery: sends each event until the app acknowledges it, by the rules
    in the module docstring. ``ack_timeout`` and ``retry_delays`` may be shortened by tests."""

    def __init__(self, standin: SlackStandIn) -> None:
        self.standin = standin
        self.ack_timeout = ACK_TIMEOUT
        self.retry_delays: tuple[float, ...] = RETRY_DELAYS
        self.events_url = ""
        """Where HTTP mode posts (the app's Request URL)."""
        self.deliveries: list[Delivery] = []
        self.on_send: Callable[[Delivery], None] | None = None
        """Called the moment an attempt goes on the wire (tests kill processes there)."""
        self.on_ack: Callable[[Delivery], None] | None = None
        """Called the moment an acknowledgement arrives."""
        self._waiting: dict[str, tuple[web.WebSocketResponse, Delivery, asyncio.Future[Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._http: aiohttp.ClientSession | None = None

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
            self._http = None

    def send_event(self, body: dict[str, Any], mode: Mode) -> Delivery:
        """Start delivering an ``event_callback`` body; retried until acked or given up."""
        delivery = Delivery(kind="event", body=body)
        attempts = len(self.retry_delays) + 1
        self._start(delivery, self._envelope if mode == "socket" else self._post_json, attempts)
        return delivery

    def send_command(self, payload: dict[str, str], mode: Mode) -> Delivery:
        """Deliver a slash command once: Slack never retries one."""
        delivery = Delivery(kind="command", body=payload)
        self._start(delivery, self._envelope if mode == "socket" else self._post_form, 1)
        return delivery

    def send_interaction(self, payload: dict[str, Any], mode: Mode) -> Delivery:
        """Deliver an interaction (a button press) once: Slack never retries one."""
        delivery = Delivery(kind="interaction", body=payload)
        self._start(delivery, self._envelope if mode == "socket" else self._post_payload, 1)
        return delivery

    def _start(self, delivery: Delivery, send: Sender, attempts: int) -> None:
        self.deliveries.append(delivery)
        task = asyncio.create_task(self._run(delivery, send, attempts))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, delivery: Delivery, send: Sender, attempts: int) -> None:
        reason = ""
        try:
            for number in range(attempts):
                if number:
                    await asyncio.sleep(self.retry_delays[number - 1])
                attempt = await send(delivery, number, reason)
                delivery.attempts.append(attempt)
                if attempt.outcome == "acked":
                    return
                reason = attempt.outcome
            delivery.gave_up = True
        finally:
            delivery.finished.set()

    # -- Socket Mode ---------------------------------------------------------------------------

    async def _envelope(self, delivery: Delivery, number: int, reason: str) -> Attempt:
        ws = await self.standin.wait_connected(timeout=None)  # after a reconnect if need be
        envelope_id = f"env-{self.standin.new_id('')}"
        envelope: dict[str, Any] = {"envelope_id": envelope_id, "payload": delivery.body}
        if delivery.kind == "event":
            envelope.update(
                type="events_api",
                accepts_response_payload=False,
                retry_attempt=number,
                retry_reason=reason,
            )
        elif delivery.kind == "interaction":
            envelope.update(type="interactive", accepts_response_payload=False)
        else:
            envelope.update(type="slash_commands", accepts_response_payload=True)
        acked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[envelope_id] = (ws, delivery, acked)
        try:
            await ws.send_json(envelope)
            self._sent(delivery)
            async with asyncio.timeout(self.ack_timeout):
                delivery.response = await acked
            return Attempt(number, "acked")
        except TimeoutError:
            return Attempt(number, "timeout")  # a late ack counts for nothing
        except (ConnectionError, RuntimeError):
            return Attempt(number, "connection_lost")
        finally:
            self._waiting.pop(envelope_id, None)

    def acknowledged(self, envelope_id: str, payload: Any) -> None:
        waiting = self._waiting.get(envelope_id)
        if waiting is not None and not waiting[2].done():
            waiting[2].set_result(payload)
            if self.on_ack is not None:
                self.on_ack(waiting[1])

    def connection_closed(self, ws: web.WebSocketResponse) -> None:
        for owner, _, acked in list(self._waiting.values()):
            if owner is ws and not acked.done():
                acked.set_exception(ConnectionResetError("the connection closed before the ack"))

    # -- HTTP ----------------------------------------------------------------------------------

    async def _post_json(self, delivery: Delivery, number: int, reason: str) -> Attempt:
        raw = json.dumps(delivery.body).encode()
        headers = signed_headers(raw, "application/json", self.standin.signing_secret)
        if number:
            headers.update({"X-Slack-Retry-Num": str(number), "X-Slack-Retry-Reason": reason})
        return await self._post(delivery, number, raw, headers)

    async def _post_form(self, delivery: Delivery, number: int, reason: str) -> Attempt:
        raw = urlencode(delivery.body).encode()
        content_type = "application/x-www-form-urlencoded"
        headers = signed_headers(raw, content_type, self.standin.signing_secret)
        return await self._post(delivery, number, raw, headers)

    async def _post_payload(self, delivery: Delivery, number: int, reason: str) -> Attempt:
        raw = urlencode({"payload": json.dumps(delivery.body)}).encode()
        content_type = "application/x-www-form-urlencoded"
        headers = signed_headers(raw, content_type, self.standin.signing_secret)
        return await self._post(delivery, number, raw, headers)

    async def _post(
        self, delivery: Delivery, number: int, raw: bytes, headers: dict[str, str]
    ) -> Attempt:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        try:
            async with asyncio.timeout(self.ack_timeout):
                self._sent(delivery)
                async with self._http.post(self.events_url, data=raw, headers=headers) as resp:
                    body = await resp.text()
        except TimeoutError:
            return Attempt(number, "timeout")
        except aiohttp.ClientError:
            return Attempt(number, "connection_failed")
        if not 200 <= resp.status < 300:
            return Attempt(number, "http_error", resp.status)
        delivery.response = _parse_response(body, resp.content_type)
        if self.on_ack is not None:
            self.on_ack(delivery)
        return Attempt(number, "acked", resp.status)

    def _sent(self, delivery: Delivery) -> None:
        delivery.on_wire.set()
        if self.on_send is not None:
            self.on_send(delivery)


Sender = Callable[[Delivery, int, str], Awaitable[Attempt]]


class SlackHarness:
    """PlatformHarness for Slack: the stand-in plus the real SlackAdapter pointed at it.

    ``mode="socket"`` delivers events over Socket Mode; ``mode="http"`` posts signed Events API
    requests to the adapter's own HTTP endpoint. Mentions arrive twice, as Slack sends them to an
    app subscribed to both ``message.*`` and ``app_mention``. Injecting returns once the app
    acknowledged the event (its retries included) and fails if Slack would have given up.
    """

    channel = "slack"
    max_message_chars = 4000
    bot_user_id = BOT_USER_ID

    def __init__(self, mode: Mode = "socket", *, ack_timeout: float = ACK_TIMEOUT) -> None:
        self.mode = mode
        self.standin = SlackStandIn()
        self.standin.sender.ack_timeout = ack_timeout
        self.http_url = ""
        self.wait_timeout = 10.0
        self._http: aiohttp.ClientSession | None = None
        self._authors: dict[tuple[str, str], str] = {}

    async def start(self) -> None:
        await self.standin.start()
        self._http = aiohttp.ClientSession()

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
        await self.standin.stop()

    def make_adapter(self, **overrides: Any) -> Adapter:
        from adapters.slack.adapter import SlackAdapter
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
        self.standin.sender.events_url = self.http_url
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
        wait: bool = True,
    ) -> str:
        """Deliver a user's message as Slack would; ``files`` come from ``standin.add_file``.

        With ``wait`` (the default) this returns once the app acknowledged the event."""
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
            if sender_id not in self.standin.users:
                self.standin.add_user(sender_id, sender_name)
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

        deliveries = [self.send_event(event)]
        if mention and chat_type == "group":
            mention_event = {k: v for k, v in event.items() if k != "channel_type"}
            mention_event["type"] = "app_mention"
            deliveries.append(self.send_event(mention_event))
        if wait:
            for delivery in deliveries:
                await delivery.wait(self.wait_timeout)
        return ts

    async def deliver_raw(self, event: Mapping[str, Any]) -> Delivery:
        """Deliver an arbitrary (possibly malformed) event as an ``event_callback``."""
        return await self.send_event(dict(event)).wait(self.wait_timeout)

    def send_event(self, event: dict[str, Any]) -> Delivery:
        """Start delivering ``event`` in an ``event_callback`` body (Slack's retries included)."""
        key = f"{event.get('channel')}:{event.get('ts')}:{event.get('type')}"
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
        return self.standin.sender.send_event(body, self.mode)

    async def slash_command(
        self,
        text: str,
        *,
        command: str = "/clawbot",
        sender_id: str = "1001",
        sender_name: str = "Ann",
        chat_id: str | None = None,
        chat_type: Literal["dm", "group"] = "dm",
    ) -> Delivery:
        """Run ``{command} {text}`` as a user would in the Slack client; returns once acked."""
        if sender_id not in self.standin.users:
            self.standin.add_user(sender_id, sender_name)
        chat = chat_id or (f"D{sender_id}" if chat_type == "dm" else "C0GENERAL")
        payload = {
            "token": "legacy-verification-token",
            "team_id": TEAM_ID,
            "team_domain": "standin",
            "channel_id": chat,
            "channel_name": "directmessage" if chat.startswith("D") else "general",
            "user_id": sender_id,
            "user_name": sender_name.lower(),
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"{self.standin.base_url}/commands/{self.standin.new_id('R')}",
            "trigger_id": f"{self.standin.new_id('')}.{sender_id}.{self.standin.new_id('t')}",
        }
        return await self.standin.sender.send_command(payload, self.mode).wait(self.wait_timeout)

    def buttons(self, record: SentRecord) -> list[tuple[str, str]]:
        """(label, value) of each button in the blocks of a message the bot posted."""
        return [(b["text"]["text"], b["value"]) for b in _buttons(record.raw.get("blocks"))]

    def shown(self, record: SentRecord) -> SentRecord:
        update = self.standin.updates.get((record.chat_id, record.message_id))
        if update is None:
            return record
        return replace(record, text=str(update.get("text") or ""), raw=update)

    def delete(self, record: SentRecord) -> None:
        self.standin.deleted.add((record.chat_id, record.message_id))

    async def press(
        self, record: SentRecord, label: str, *, sender_id: str = "1001", sender_name: str = "Ann"
    ) -> Delivery:
        """Press the button ``label`` under a message the bot posted, as ``sender_id``: a
        ``block_actions`` interaction. Returns once the app acked it; an AssertionError if it
        did not within 3 s (the presser would see an error)."""
        blocks = record.raw.get("blocks")
        (button,) = [b for b in _buttons(blocks) if b["text"]["text"] == label]
        (block,) = [b for b in blocks or () if button in b.get("elements", ())]
        if sender_id not in self.standin.users:
            self.standin.add_user(sender_id, sender_name)
        action_ts = self.standin.next_ts()
        message: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "text": record.text,
            "ts": record.message_id,
            "blocks": blocks,
        }
        if record.thread_id:
            message["thread_ts"] = record.thread_id
        payload = {
            "type": "block_actions",
            "user": {
                "id": sender_id,
                "username": sender_name.lower(),
                "name": sender_name.lower(),
                "team_id": TEAM_ID,
            },
            "api_app_id": APP_ID,
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": record.message_id,
                "channel_id": record.chat_id,
                "is_ephemeral": False,
            },
            "trigger_id": f"{self.standin.new_id('')}.{sender_id}.{self.standin.new_id('t')}",
            "team": {"id": TEAM_ID, "domain": "standin"},
            "channel": {
                "id": record.chat_id,
                "name": "directmessage" if record.chat_id.startswith("D") else "general",
            },
            "message": message,
            "response_url": f"{self.standin.base_url}/actions/{self.standin.new_id('R')}",
            "actions": [
                {
                    "type": "button",
                    "block_id": block["block_id"],
                    "action_id": button["action_id"],
                    "text": button["text"],
                    "value": button["value"],
                    "action_ts": action_ts,
                }
            ],
        }
        return await self.standin.sender.send_interaction(payload, self.mode).wait(3.0)

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[SentRecord]:
        return await self.standin.wait_posted(count, timeout)

    # MediaHarness

    async def send_image(self, data: bytes, *, caption: str = "") -> None:
        await self.inject_message(
            caption, files=[self.standin.add_file("image.jpg", data, "image/jpeg")]
        )

    async def send_voice(self, data: bytes, *, seconds: int) -> None:
        clip = self.standin.add_audio_clip(data, duration_ms=seconds * 1000 + 200)
        await self.inject_message("", files=[clip])

    async def send_file(self, data: bytes, name: str, mime_type: str, *, caption: str = "") -> None:
        await self.inject_message(caption, files=[self.standin.add_file(name, data, mime_type)])

    def lose_files(self) -> None:
        for file_id in list(self.standin.files):
            self.standin.delete_file(file_id)

    def hold_downloads(self, release: asyncio.Event) -> None:
        self.standin.downloads_held = release

    def private_answers(self) -> list[tuple[str, str]]:
        return [(str(r.raw["user"]), r.text) for r in self.standin.ephemeral]

    async def wait_private(self, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        async with asyncio.timeout(timeout):
            while len(self.standin.ephemeral) < count:
                self.standin._posted_changed.clear()
                await self.standin._posted_changed.wait()
        return self.private_answers()

    def sent(self) -> list[SentRecord]:
        return list(self.standin.posted)

    def fail_next_sends(self, count: int = 1, *, status: int = 429, retry_after: float = 0) -> None:
        self.standin.fail_next_sends(count, status, retry_after)

    def reject_formatting_next(self) -> None:
        self.standin.reject_formatting_next()

    def typing_events(self) -> list[str]:
        """Always empty for a regular bot: Slack gives bots no typing indicator (module doc)."""
        return list(self.standin.typing)

    @property
    def upload_limit(self) -> int:
        return self.standin.uploads.limit

    @upload_limit.setter
    def upload_limit(self, limit: int) -> None:
        self.standin.uploads.limit = limit

    def received_files(self) -> list[ReceivedFile]:
        return list(self.standin.uploads.received)

    async def wait_files(self, count: int, timeout: float = 5.0) -> list[ReceivedFile]:
        async with asyncio.timeout(timeout):
            while len(self.standin.uploads.received) < count:
                self.standin._posted_changed.clear()
                await self.standin._posted_changed.wait()
        return self.received_files()

    def _last_bot_message(self, chat: str) -> str:
        for record in reversed(self.standin.posted):
            if record.chat_id == chat:
                return record.message_id
        ts = self.standin.next_ts()
        self._authors[(chat, ts)] = BOT_USER_ID
        return ts

    async def post_signed(
        self, body: Mapping[str, Any], *, retry_num: int = 0, secret: str | None = None
    ) -> tuple[int, str]:
        """POST one Events API request to the adapter, signed like Slack signs it."""
        assert self._http is not None, "harness not started"
        raw = json.dumps(body).encode()
        headers = signed_headers(raw, "application/json", secret or self.standin.signing_secret)
        if retry_num:
            headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "timeout"})
        async with self._http.post(self.http_url, data=raw, headers=headers) as resp:
            return resp.status, await resp.text()


def _buttons(blocks: Any) -> list[dict[str, Any]]:
    return [
        element
        for block in blocks or ()
        if block.get("type") == "actions"
        for element in block.get("elements", ())
        if element.get("type") == "button"
    ]


def _valid_blocks(blocks: Any) -> bool:
    """Slack's checks on the blocks clawbot sends (sections and buttons)."""
    if not isinstance(blocks, list) or not 1 <= len(blocks) <= 50:
        return False
    action_ids: set[str] = set()
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "section":
            text = block.get("text") or {}
            if text.get("type") not in ("mrkdwn", "plain_text"):
                return False
            if not 1 <= len(str(text.get("text") or "")) <= 3000:
                return False
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
                return False
            for button in elements:
                label = button.get("text") or {}
                action_id = str(button.get("action_id") or "")
                if label.get("type") != "plain_text" or not 1 <= len(label.get("text", "")) <= 75:
                    return False
                if not 1 <= len(action_id) <= 255 or action_id in action_ids:
                    return False
                if len(str(button.get("value") or "")) > 2000:
                    return False
                action_ids.add(action_id)
        else:
            return False
    return True


def _parse_response(body: str, content_type: str) -> Any:
    if content_type == "application/json" and body:
        return json.loads(body)
    return body or None


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None


def _truthy(value: Any) -> bool:
    return value not in (False, "false", "False", "0", 0)


def _ok_false(
    error: str, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response({"ok": False, "error": error}, status=status, headers=headers)
