"""A local Discord: REST API v10 and the gateway websocket on 127.0.0.1, enough for discord.py.

The real ``discord.Client`` runs against it unmodified apart from the two base URLs the adapter
points at it (``Route.BASE`` for REST, the gateway URL this server returns from
``GET /gateway/bot``). Payloads follow Discord's documented shapes; ids are real snowflakes.

Message components (buttons) are checked as Discord checks them and kept on the message. A
press is an INTERACTION_CREATE (type 3, component) over the gateway; Discord wants the
interaction answered (``POST /interactions/{id}/{token}/callback``) within 3 seconds, once:
later, the token is unknown (10062); twice, "already acknowledged" (40060). Once answered,
its token takes follow-up messages (``POST /webhooks/{application id}/{token}``, 15 minutes);
one with flags 64 (EPHEMERAL) is shown to the presser alone and kept apart from the channel's
messages (``ephemeral``). ``PATCH
/channels/{id}/messages/{id}`` edits a message the bot posted (``components: []`` removes its
buttons); a deleted message is unknown (10008), another's cannot be edited (50005), content
over 2000 characters is an invalid form body (50035, BASE_TYPE_MAX_LENGTH). ``DELETE`` of
the same route deletes a message of the bot's (204; 10008 once it is gone).

A message posted with a ``nonce`` (at most 25 characters) carries it; with ``enforce_nonce``
(which discord.py sends with every nonce) a nonce the bot used within the last few minutes
(``NONCE_SECONDS``) creates nothing: the message it created then is returned, or 10008 when
that one was deleted.

Rate limits (:data:`DISCORD_RATES`, on by default): posting to a channel, editing and
deleting in it each have a per-channel bucket, whose state every answer reports in Discord's
``X-RateLimit-*`` headers (discord.py reads them and waits before a bucket runs dry); a
request over a bucket is answered 429 with ``retry_after`` in the JSON body and the
``Retry-After`` / ``X-RateLimit-Reset-After`` headers. ``book`` counts each channel's
messages, edits and refusals, and the requests that came before a retry-after had passed;
``chat_shows`` is what a channel shows in the end.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import quote

from aiohttp import WSMsgType, web

from clawbot.channels.interface import Adapter
from tests.standins.harness import ButtonHarness, FileHarness, SentRecord
from tests.standins.rate_rules import FixedWindow, FixedWindowState, Limit, RateBook

from .discord_uploads import MAX_UPLOAD_BYTES, DiscordUploads
from .uploads import ReceivedFile

if TYPE_CHECKING:
    from discord.types.guild import Guild as GuildPayload
    from discord.types.message import Message as MessagePayload
    from discord.types.user import User as UserPayload

BOT_USER_ID = "1100000000000000001"
APPLICATION_ID = BOT_USER_ID
GUILD_ID = "1100000000000000100"
GENERAL_CHANNEL_ID = "1100000000000000110"
NEWS_CHANNEL_ID = "1100000000000000120"
OTHER_BOT_ID = "1100000000000000002"
OWNER_ID = "1100000000000000003"

# Shaped like a real bot token (base64 user id . timestamp . hmac) but valid only here.
BOT_TOKEN = (
    base64.urlsafe_b64encode(BOT_USER_ID.encode()).decode().rstrip("=")
    + ".GsTand.in-only-token_for-local-tests-00000000"
)

DISCORD_EPOCH_MS = 1420070400000
OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME = 0, 1, 2, 6
OP_RECONNECT, OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 7, 9, 10, 11
INTENT_MESSAGE_CONTENT = 1 << 15
INTERACTION_ANSWER_SECONDS = 3.0
NONCE_SECONDS = 120.0
"""How long an enforced nonce returns the message it created: "the past few minutes" in
Discord's documentation, taken at its shortest here."""
MAX_NONCE_CHARS = 25

MAX_CONTENT = 2000
PER_CHANNEL = FixedWindow(limit=5, seconds=5.0)


@dataclass(frozen=True)
class DiscordRates:
    """Discord's per-channel buckets. Its rate-limit page (discord.com/developers/docs/topics/
    rate-limits) gives no numbers on purpose ("rate limits should not be hard coded into your
    app ... parse response headers") but says per-route limits are counted per top-level
    resource, the channel here; what Discord's headers report for a channel's messages is 5
    requests per 5 s (``X-RateLimit-Limit: 5``), for posting and, in a bucket of its own, for
    editing. A window opens at its first request and resets 5 s later."""

    post: Limit = PER_CHANNEL
    edit: Limit = PER_CHANNEL
    delete: Limit = PER_CHANNEL
    """Deleting a message: a bucket of its own, as for editing."""


DISCORD_RATES = DiscordRates()
Route = Literal["post", "edit", "delete"]
_BUCKETS = {"post": "5a1e5d0c9b8a", "edit": "e417d0c9b8a7", "delete": "d3e1e7e0c9b8"}
"""The ``X-RateLimit-Bucket`` of each route: posting, editing and deleting are separate
buckets."""

_MARKDOWN = re.compile(r"[*_~`|]|^\s*(?:>|#{1,3}\s|-#\s|[-*]\s)|\[[^\]]*\]\([^)]*\)", re.M)
_ESCAPED = re.compile(r"\\.")


def is_formatted(content: str) -> bool:
    """Whether Discord would render ``content`` differently from its literal text."""
    return bool(_MARKDOWN.search(_ESCAPED.sub("e", content)))


def _iso(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).isoformat()


def _json(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON response as Discord sends it: Content-Type exactly ``application/json`` (no
    charset), which is what discord.py checks before decoding."""
    response = web.Response(text=json.dumps(data), status=status, headers=headers)
    response.headers["Content-Type"] = "application/json"
    return response


def _user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": user_id,
        "username": name.lower().replace(" ", "_"),
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "public_flags": 0,
    }
    if bot:
        payload["bot"] = True
    return payload


@dataclass
class StoredFile:
    """An attachment the stand-in's CDN serves."""

    filename: str
    data: bytes
    content_type: str
    signature: str = ""
    expires: int = 0
    """The CDN hour (``cdn_now``) from which its signed URL no longer works."""


CDN_URL_HOURS = 24
"""How long Discord's signed attachment URLs (``ex``, ``is``, ``hm``) stay valid."""
IS_VOICE_MESSAGE = 1 << 13


@dataclass
class _Session:
    session_id: str
    shard: int = 0
    sequence: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


class DiscordStandIn:
    """The server: REST under ``/api/v10``, the gateway websocket at ``/``, files under
    ``/attachments``. State is inspectable by tests (``requests``, ``messages``; the files
    the bot uploaded in ``uploads``, ``tests.standins.discord_uploads``)."""

    def __init__(self, token: str = BOT_TOKEN) -> None:
        self.token = token
        self.port = 0
        self.bot_user = _user(BOT_USER_ID, "Claw Bot", bot=True)
        self.requests: list[tuple[str, str, Any]] = []
        self.messages: dict[str, dict[str, Any]] = {}
        self.posted: list[str] = []
        self.deleted: set[str] = set()
        """Ids of messages deleted (kept in ``messages`` as what the bot posted)."""
        self.identify_payloads: list[dict[str, Any]] = []
        self.session_counts: list[tuple[int, int]] = []
        """(shard, gateway sessions open on it) after each session opened or closed: see
        ``open_sessions``."""
        self.resumes: list[dict[str, Any]] = []
        self.typing: list[str] = []
        self.files: dict[str, StoredFile] = {}
        self.uploads = DiscordUploads(self)
        self.cdn_now = 1_700_000_000 // 3600
        """The CDN's clock, in hours: ``expire_attachment_urls`` moves it past every URL."""
        self.downloads_held: asyncio.Event | None = None
        """While set to an unset event, CDN downloads wait for it (a slow CDN)."""
        self.channels: dict[str, dict[str, Any]] = {
            GENERAL_CHANNEL_ID: self._text_channel(GENERAL_CHANNEL_ID, "general", 0),
            NEWS_CHANNEL_ID: self._text_channel(NEWS_CHANNEL_ID, "announcements", 5),
        }
        self.threads: dict[str, dict[str, Any]] = {}
        self.dm_channels: dict[str, dict[str, Any]] = {}
        self.fail_sends: list[tuple[int, float]] = []
        self.nonces: dict[str, tuple[str, float]] = {}
        """Nonce -> (the message it created, monotonic time) of each message the bot posted
        with one."""
        self._answers_held: asyncio.Event | None = None
        self._change = asyncio.Event()
        self.fail_edits: list[float] = []
        """Retry-afters of 429s to answer the next edits with, whatever the buckets say."""
        self.rates = DISCORD_RATES
        self.book = RateBook(resolution=0.001)  # Discord's retry_after has milliseconds
        self.reject_formatting = False
        self.sent_changed = asyncio.Event()
        self.connected = asyncio.Event()
        self.message_content_intent = True
        """Whether the Message Content intent is enabled for the app in the developer
        portal: without it Discord closes each IDENTIFY that asks for it with 4014."""
        self._snowflakes = itertools.count(1)
        self._ws_lock = asyncio.Lock()
        self._all_ws: set[web.WebSocketResponse] = set()
        self._live: dict[web.WebSocketResponse, _Session] = {}
        """Connections with an open session (READY or RESUMED said), oldest first."""
        self._session: _Session | None = None
        self._sessions: dict[str, _Session] = {}
        self._runner: web.AppRunner | None = None
        self.history = ChannelHistory(self)
        self.interactions: dict[str, tuple[str, float]] = {}
        """Interactions sent and not answered yet: id -> (token, monotonic deadline)."""
        self.interaction_answers: list[tuple[str, int]] = []
        """(interaction id, callback type) of each answer, in order."""
        self.interaction_tokens: dict[str, tuple[str, str, str]] = {}
        """Token -> (interaction id, channel id, the presser's id) of each interaction sent."""
        self.ephemeral: list[tuple[str, str]] = []
        """(the presser's id, content) of each ephemeral follow-up message, in order."""

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_UPLOAD_BYTES + 2 * 1024 * 1024)
        api = "/api/v10"
        app.router.add_get("/", self._gateway)
        app.router.add_get(api + "/users/@me", self._me)
        app.router.add_get(api + "/oauth2/applications/@me", self._application)
        app.router.add_get(api + "/gateway", self._gateway_url)
        app.router.add_get(api + "/gateway/bot", self._gateway_bot)
        app.router.add_get(api + "/channels/{channel_id}", self._get_channel)
        app.router.add_post(api + "/channels/{channel_id}/messages", self._post_message)
        app.router.add_get(api + "/channels/{channel_id}/messages", self.history.respond)
        app.router.add_patch(
            api + "/channels/{channel_id}/messages/{message_id}", self._patch_message
        )
        app.router.add_delete(
            api + "/channels/{channel_id}/messages/{message_id}", self._delete_message
        )
        app.router.add_post(api + "/channels/{channel_id}/typing", self._post_typing)
        app.router.add_post(
            api + "/interactions/{interaction_id}/{token}/callback", self._interaction_callback
        )
        app.router.add_post(api + "/webhooks/{application_id}/{token}", self._follow_up)
        app.router.add_get("/attachments/{channel_id}/{file_id}/{filename}", self._get_file)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        for ws in list(self._all_ws):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(code=1001), timeout=2.0)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.http_base}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    # ---- world -----------------------------------------------------------------------------

    def snowflake(self) -> str:
        millis = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return str((millis << 22) | (next(self._snowflakes) & 0x3FFFFF))

    def _text_channel(self, channel_id: str, name: str, kind: int) -> dict[str, Any]:
        return {
            "id": channel_id,
            "type": kind,
            "guild_id": GUILD_ID,
            "name": name,
            "position": 0,
            "permission_overwrites": [],
            "parent_id": None,
            "nsfw": False,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }

    def ensure_channel(self, channel_id: str) -> dict[str, Any]:
        if channel_id not in self.channels:
            self.channels[channel_id] = self._text_channel(channel_id, f"chan-{channel_id}", 0)
        return self.channels[channel_id]

    def thread_payload(self, thread_id: str, parent_id: str) -> dict[str, Any]:
        return {
            "id": thread_id,
            "guild_id": GUILD_ID,
            "parent_id": parent_id,
            "owner_id": OWNER_ID,
            "name": f"thread-{thread_id}",
            "type": 11,
            "last_message_id": None,
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _iso(),
                "locked": False,
            },
        }

    def dm_channel_for(self, user: dict[str, Any], channel_id: str | None = None) -> str:
        existing = next(
            (c for c in self.dm_channels.values() if c["recipients"][0]["id"] == user["id"]),
            None,
        )
        if channel_id is None and existing is not None:
            return str(existing["id"])
        channel_id = channel_id or self.snowflake()
        self.dm_channels[channel_id] = {
            "id": channel_id,
            "type": 1,
            "recipients": [user],
            "last_message_id": None,
            "flags": 0,
        }
        return channel_id

    def guild_payload(self) -> dict[str, Any]:
        everyone = {
            "id": GUILD_ID,
            "name": "@everyone",
            "color": 0,
            "hoist": False,
            "position": 0,
            "permissions": "104324673",
            "managed": False,
            "mentionable": False,
        }
        return {
            "id": GUILD_ID,
            "name": "Stand-in Guild",
            "unavailable": False,
            "owner_id": OWNER_ID,
            "member_count": 3,
            "large": False,
            "joined_at": _iso(),
            "roles": [everyone],
            "emojis": [],
            "stickers": [],
            "features": [],
            "channels": list(self.channels.values()),
            "threads": list(self.threads.values()),
            "members": [
                {
                    "user": self.bot_user,
                    "roles": [],
                    "joined_at": _iso(),
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
        }

    def message_payload(
        self,
        *,
        channel_id: str,
        author: dict[str, Any],
        content: str,
        guild: bool,
        message_id: str | None = None,
        mentions: Sequence[dict[str, Any]] = (),
        reference: dict[str, Any] | None = None,
        attachments: Sequence[dict[str, Any]] = (),
        channel_type: int = 0,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": message_id or self.snowflake(),
            "channel_id": channel_id,
            "author": author,
            "content": content,
            "timestamp": _iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": list(mentions),
            "mention_roles": [],
            "attachments": list(attachments),
            "embeds": [],
            "pinned": False,
            "type": 19 if reference else 0,
            "flags": IS_VOICE_MESSAGE if any("waveform" in a for a in attachments) else 0,
            "channel_type": channel_type,
        }
        if guild:
            payload["guild_id"] = GUILD_ID
            payload["member"] = {
                "roles": [],
                "joined_at": _iso(),
                "deaf": False,
                "mute": False,
                "nick": None,
                "flags": 0,
            }
        if reference is not None:
            payload["message_reference"] = {
                "type": 0,
                "message_id": reference["id"],
                "channel_id": reference["channel_id"],
                **({"guild_id": GUILD_ID} if guild else {}),
            }
            payload["referenced_message"] = reference
        return payload

    def add_file(
        self,
        channel_id: str,
        filename: str,
        data: bytes,
        content_type: str,
        *,
        declared_size: int | None = None,
        duration_secs: float | None = None,
    ) -> dict[str, Any]:
        """Store a file on the CDN; returns the attachment object a message carries. Its
        URL is signed as Discord signs them (``ex``: the hour it expires, ``is``: issued,
        ``hm``: the signature), and the CDN serves it only with the three, until it expires.
        ``duration_secs`` makes it a voice message (with its waveform, as Discord sends)."""
        file_id = self.snowflake()
        signature = f"{hash((file_id, filename)) & 0xFFFFFFFFFFFF:012x}"
        expires = self.cdn_now + CDN_URL_HOURS
        self.files[file_id] = StoredFile(filename, data, content_type, signature, expires)
        url = (
            f"{self.http_base}/attachments/{channel_id}/{file_id}/{quote(filename, safe='')}"
            f"?ex={expires * 3600:x}&is={self.cdn_now * 3600:x}&hm={signature}&"
        )
        attachment: dict[str, Any] = {
            "id": file_id,
            "filename": filename,
            "size": len(data) if declared_size is None else declared_size,
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }
        if duration_secs is not None:
            attachment["duration_secs"] = duration_secs
            attachment["waveform"] = base64.b64encode(bytes(range(0, 256, 4))).decode()
        return attachment

    def expire_attachment_urls(self) -> None:
        """A day passes on the CDN: every attachment URL handed out so far stops working."""
        self.cdn_now += CDN_URL_HOURS

    # ---- waiting on the world --------------------------------------------------------------

    def _changed(self) -> None:
        """Wake whoever waits in :meth:`until`: a session opened or closed, a message posted
        (or asked to be) or edited, an interaction answered."""
        woken, self._change = self._change, asyncio.Event()
        woken.set()

    async def until(self, condition: Callable[[], bool], timeout: float) -> None:
        """Return once ``condition`` (on this server's state) holds, looking again at each
        change; TimeoutError after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            while not condition():
                await self._change.wait()

    def hold_answers(self) -> None:
        """From now on a message the bot posts is created (and shown), but the answer to its
        POST waits for :meth:`release_answers`: the bot cannot know it was taken, as when it
        dies or its connection drops in between."""
        self._answers_held = asyncio.Event()

    def release_answers(self) -> None:
        held, self._answers_held = self._answers_held, None
        if held is not None:
            held.set()

    # ---- gateway ---------------------------------------------------------------------------

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send one DISPATCH to every open session (each keeps it for RESUME replays):
        Discord sends a shard's events to each session open on it."""
        await asyncio.wait_for(self.connected.wait(), timeout=5.0)
        await self.publish(event, data)

    async def publish(self, event: str, data: dict[str, Any]) -> bool:
        """Dispatch to the sessions open now, without waiting for one: with none open, the
        event is kept for a RESUME of the last session (as Discord does), and a new session
        (IDENTIFY) never gets it. Whether it went out now."""
        live = list(self._live.items())
        if not live:
            if self._session is not None:
                self._frame(self._session, event, data)
            return False
        went_out = False
        for ws, session in live:
            try:
                await self._send(ws, self._frame(session, event, data))
            except ConnectionError:  # the client died mid-write: it is gone with the socket
                continue
            went_out = True
        return went_out

    async def _send(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        async with self._ws_lock:
            await ws.send_str(json.dumps(frame))

    def open_sessions(self, shard: int = 0) -> int:
        """The gateway sessions open on ``shard`` now, as Discord counts them: from READY
        (or RESUMED) until their connection closes, whether or not anyone reads them."""
        return sum(1 for session in self._live.values() if session.shard == shard)

    def most_open_sessions(self, shard: int = 0, *, since: int = 0) -> int:
        """The most sessions open at once on ``shard`` from ``session_counts[since]`` on
        (counting the sessions open then)."""
        before = [count for at, count in self.session_counts[:since] if at == shard]
        counts = [count for at, count in self.session_counts[since:] if at == shard]
        return max([*before[-1:], *counts], default=0)

    def _count_sessions(self, shard: int) -> None:
        self.session_counts.append((shard, self.open_sessions(shard)))

    async def drop_gateway(self, code: int = 4000, *, end_session: bool = False) -> None:
        """Close every live gateway connection the way a network failure or a restart
        would; ``end_session`` also makes Discord forget their sessions, so a RESUME is
        refused (INVALID_SESSION) and the client has to IDENTIFY anew, missing what came
        meanwhile."""
        live = list(self._live.items())
        for ws, session in live:
            self._live.pop(ws, None)
            self._count_sessions(session.shard)
            if end_session:
                self._sessions.pop(session.session_id, None)
        self.connected.clear()
        self._changed()
        for ws, _session in live:
            await ws.close(code=code)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._all_ws.add(ws)
        try:
            await self._send(ws, {"op": OP_HELLO, "d": {"heartbeat_interval": 41250}})
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                await self._on_frame(ws, frame)
        finally:
            self._all_ws.discard(ws)
            self._closed(ws)
        return ws

    def _closed(self, ws: web.WebSocketResponse) -> None:
        """A connection ended: its session is no longer open. A client that closed it with
        1000 or 1001 ended the session too (Discord forgets it: no RESUME)."""
        session = self._live.pop(ws, None)
        if session is None:
            return
        if ws.close_code in (1000, 1001):
            self._sessions.pop(session.session_id, None)
        self._count_sessions(session.shard)
        if not self._live:
            self.connected.clear()
        self._changed()

    async def _on_frame(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        if op == OP_HEARTBEAT:  # its "d" is the last sequence number, not an object
            await self._send(ws, {"op": OP_HEARTBEAT_ACK})
            return
        data: dict[str, Any] = frame.get("d") or {}
        if op == OP_IDENTIFY:
            if data.get("token") != self.token:
                await ws.close(code=4004, message=b"Authentication failed.")
                return
            if not data.get("intents", 0) & INTENT_MESSAGE_CONTENT or not (
                self.message_content_intent
            ):
                # Discord closes with 4014 when a privileged intent is not enabled for the app.
                await ws.close(code=4014, message=b"Disallowed intent(s).")
                return
            self.identify_payloads.append(data)
            shard = data.get("shard") or [0, 1]
            session = _Session(session_id=f"sess-{self.snowflake()}", shard=int(shard[0]))
            self._sessions[session.session_id] = session
            ready = {
                "v": 10,
                "user": self.bot_user,
                "guilds": [{"id": GUILD_ID, "unavailable": True}],
                "session_id": session.session_id,
                "resume_gateway_url": self.gateway_url,
                "application": {"id": APPLICATION_ID, "flags": 0},
                "private_channels": [],
                "relationships": [],
            }
            first = [("READY", ready), ("GUILD_CREATE", self.guild_payload())]
            await self._open(session, ws, [self._frame(session, *event) for event in first])
        elif op == OP_RESUME:
            self.resumes.append(data)
            known = self._sessions.get(data.get("session_id", ""))
            if data.get("token") != self.token or known is None:
                await self._send(ws, {"op": OP_INVALID_SESSION, "d": False})
                return
            missed = [e for e in known.events if e["s"] > (data.get("seq") or 0)]
            await self._open(known, ws, [*missed, self._frame(known, "RESUMED", {})])

    @staticmethod
    def _frame(session: _Session, event: str, data: dict[str, Any]) -> dict[str, Any]:
        """The next DISPATCH of ``session`` (kept for RESUME replays)."""
        session.sequence += 1
        frame = {"op": OP_DISPATCH, "t": event, "s": session.sequence, "d": data}
        session.events.append(frame)
        return frame

    async def _open(
        self, session: _Session, ws: web.WebSocketResponse, frames: list[dict[str, Any]]
    ) -> None:
        """Make ``session`` the live one on ``ws``, opening with ``frames`` (READY, or the
        replay and RESUMED): as on Discord, what happens meanwhile comes after them, in
        order, on this connection."""
        async with self._ws_lock:
            self._session = session
            self._live[ws] = session
            self._count_sessions(session.shard)
            self.connected.set()
            for frame in frames:
                await ws.send_str(json.dumps(frame))
        self._changed()

    # ---- REST ------------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {self.token}"

    @staticmethod
    def _error(status: int, message: str, code: int = 0, **extra: Any) -> web.Response:
        return _json({"message": message, "code": code, **extra}, status=status)

    @staticmethod
    def _ratelimit_headers(
        remaining: int, reset_after: float, *, bucket: str = "b3f2c1d0e9a8", limit: int = 5
    ) -> dict[str, str]:
        return {
            "X-RateLimit-Bucket": bucket,
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "Via": "1.1 google",
        }

    def _route(self, route: Route, channel_id: str) -> tuple[str, Limit]:
        limit = {"post": self.rates.post, "edit": self.rates.edit, "delete": self.rates.delete}
        return f"{channel_id}:{route}", limit[route]

    def _bucket_headers(self, route: Route, channel_id: str) -> dict[str, str]:
        """The bucket's state after a request, as Discord reports it."""
        key, limit = self._route(route, channel_id)
        state = self.book.state(key, limit)
        if not isinstance(state, FixedWindowState):
            return self._ratelimit_headers(1, 0.0, bucket=_BUCKETS[route], limit=1)
        now = self.book.clock()
        return self._ratelimit_headers(
            state.remaining(now),
            state.reset_after(now),
            bucket=_BUCKETS[route],
            limit=state.rule.limit,
        )

    def _too_many(self, route: str, retry_after: float, *, limit: int = 5) -> web.Response:
        """Discord's 429: ``retry_after`` in the body, the bucket emptied in the headers."""
        headers = self._ratelimit_headers(
            0, retry_after, bucket=_BUCKETS.get(route, "b3f2c1d0e9a8"), limit=limit
        )
        headers["Retry-After"] = str(math.ceil(retry_after))
        headers["X-RateLimit-Scope"] = "user"
        body = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": False,
        }
        return _json(body, status=429, headers=headers)

    def _over_bucket(self, route: Route, channel_id: str) -> web.Response | None:
        key, limit = self._route(route, channel_id)
        refusal = self.book.admit(channel_id, [(key, limit)], scope=route)
        if refusal is None:
            return None
        size = limit.limit if isinstance(limit, FixedWindow) else 1
        return self._too_many(route, refusal.retry_after, limit=size)

    def chat_shows(self, channel_id: str) -> list[str]:
        """The contents of the bot's messages in a channel, oldest first, as they show now."""
        shown = (self.messages[message_id] for message_id in self.posted)
        return [
            message["content"]
            for message in shown
            if str(message["channel_id"]) == channel_id and message["id"] not in self.deleted
        ]

    async def _me(self, request: web.Request) -> web.Response:
        self.requests.append(("GET", request.path, None))
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        return _json(self.bot_user)

    async def _application(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        return _json(
            {
                "id": APPLICATION_ID,
                "name": "Claw Bot",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": _user(OWNER_ID, "Owner"),
                "verify_key": "0" * 64,
                "flags": 1 << 19,  # GATEWAY_MESSAGE_CONTENT_LIMITED: the intent is enabled
            }
        )

    async def _gateway_url(self, request: web.Request) -> web.Response:
        return _json({"url": self.gateway_url})

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        self.requests.append(("GET", request.path, None))
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        return _json(
            {
                "url": self.gateway_url,
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 14400000,
                    "max_concurrency": 1,
                },
            }
        )

    def _channel(self, channel_id: str) -> dict[str, Any] | None:
        return (
            self.channels.get(channel_id)
            or self.threads.get(channel_id)
            or self.dm_channels.get(channel_id)
        )

    async def _get_channel(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        channel = self._channel(request.match_info["channel_id"])
        if channel is None:
            return self._error(404, "Unknown Channel", 10003)
        return _json(channel)

    async def _post_typing(self, request: web.Request) -> web.Response:
        self.requests.append(("POST", request.path, None))
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        channel_id = request.match_info["channel_id"]
        if self._channel(channel_id) is None:
            return self._error(404, "Unknown Channel", 10003)
        self.typing.append(channel_id)
        return web.Response(status=204)

    async def _post_message(self, request: web.Request) -> web.Response:
        if request.content_type == "multipart/form-data":
            return await self.uploads.post(request)
        body = await request.json()
        self.requests.append(("POST", request.path, body))
        self._changed()
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        channel_id = request.match_info["channel_id"]
        channel = self._channel(channel_id)
        if channel is None:
            return self._error(404, "Unknown Channel", 10003)
        if self.fail_sends:
            status, retry_after = self.fail_sends.pop(0)
            if status == 429:
                return self._too_many("post", retry_after)
            return self._error(status, f"{status}: stand-in failure")
        over = self._over_bucket("post", channel_id)
        if over is not None:
            return over
        content = body.get("content") or ""
        if len(content) > MAX_CONTENT:
            return self._error(
                400,
                "Invalid Form Body",
                50035,
                errors={
                    "content": {
                        "_errors": [
                            {
                                "code": "BASE_TYPE_MAX_LENGTH",
                                "message": "Must be 2000 or fewer in length.",
                            }
                        ]
                    }
                },
            )
        if not content.strip():
            return self._error(400, "Cannot send an empty message", 50006)
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > MAX_NONCE_CHARS:
            return self._error(
                400,
                "Invalid Form Body",
                50035,
                errors={
                    "nonce": {
                        "_errors": [
                            {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 25 or fewer."}
                        ]
                    }
                },
            )
        if nonce is not None and body.get("enforce_nonce"):
            earlier = self.nonces.get(str(nonce))
            if earlier is not None and time.monotonic() - earlier[1] <= NONCE_SECONDS:
                if earlier[0] in self.deleted:
                    return self._error(404, "Unknown Message", 10008)
                message = self.messages[earlier[0]]
                return _json(message, headers=self._bucket_headers("post", channel_id))
        if self.reject_formatting and is_formatted(content):
            self.reject_formatting = False
            return self._error(
                400,
                "Invalid Form Body",
                50035,
                errors={
                    "content": {
                        "_errors": [{"code": "CONTENT_TYPE_INVALID", "message": "Invalid markup."}]
                    }
                },
            )
        reference = None
        ref = body.get("message_reference")
        if ref:
            reference = self.messages.get(str(ref.get("message_id")))
            if reference is None and ref.get("fail_if_not_exists", True):
                return self._error(
                    400,
                    "Invalid Form Body",
                    50035,
                    errors={
                        "message_reference": {
                            "_errors": [
                                {"code": "REPLIES_UNKNOWN_MESSAGE", "message": "Unknown message"}
                            ]
                        }
                    },
                )
        components = body.get("components")
        if components:
            problem = _component_problem(components)
            if problem is not None:
                return self._error(
                    400, "Invalid Form Body", 50035, errors={"components": {"_errors": [problem]}}
                )
        guild = channel["type"] != 1
        message = self.message_payload(
            channel_id=channel_id,
            author=self.bot_user,
            content=content,
            guild=guild,
            reference=reference,
            channel_type=channel["type"],
        )
        if components:
            message["components"] = components
        if nonce is not None:
            message["nonce"] = str(nonce)
            self.nonces[str(nonce)] = (message["id"], time.monotonic())
        self.messages[message["id"]] = message
        self.posted.append(message["id"])
        self.book.record(channel_id, "message")
        self.sent_changed.set()
        self._changed()
        await self.publish("MESSAGE_CREATE", message)  # Discord echoes the bot's own too
        held = self._answers_held
        if held is not None:
            await held.wait()
        return _json(message, headers=self._bucket_headers("post", channel_id))

    async def _patch_message(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(("PATCH", request.path, body))
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        message = self.messages.get(request.match_info["message_id"])
        if (
            message is None
            or message["id"] in self.deleted
            or str(message["channel_id"]) != request.match_info["channel_id"]
        ):
            return self._error(404, "Unknown Message", 10008)
        if message["author"]["id"] != self.bot_user["id"]:
            return self._error(403, "Cannot edit a message authored by another user", 50005)
        channel_id = request.match_info["channel_id"]
        if self.fail_edits:
            return self._too_many("edit", self.fail_edits.pop(0))
        over = self._over_bucket("edit", channel_id)
        if over is not None:
            return over
        message = dict(message)  # a new version: records of the old one keep what they showed
        if "content" in body:
            content = body.get("content") or ""
            if len(content) > MAX_CONTENT:
                return self._error(
                    400,
                    "Invalid Form Body",
                    50035,
                    errors={
                        "content": {
                            "_errors": [
                                {
                                    "code": "BASE_TYPE_MAX_LENGTH",
                                    "message": "Must be 2000 or fewer in length.",
                                }
                            ]
                        }
                    },
                )
            message["content"] = content
        components = body.get("components")
        if components:
            problem = _component_problem(components)
            if problem is not None:
                return self._error(
                    400, "Invalid Form Body", 50035, errors={"components": {"_errors": [problem]}}
                )
            message["components"] = components
        elif "components" in body:
            message.pop("components", None)
        message["edited_timestamp"] = _iso()
        self.messages[message["id"]] = message
        self.book.record(channel_id, "edit")
        self.sent_changed.set()
        self._changed()
        return _json(message, headers=self._bucket_headers("edit", channel_id))

    async def _delete_message(self, request: web.Request) -> web.Response:
        """As Discord: a message that exists (10008 once deleted); the bot's own, as a bot
        without Manage Messages deletes no one else's (50013); 204 with no body."""
        self.requests.append(("DELETE", request.path, None))
        if not self._authorized(request):
            return self._error(401, "401: Unauthorized")
        channel_id = request.match_info["channel_id"]
        message = self.messages.get(request.match_info["message_id"])
        if (
            message is None
            or message["id"] in self.deleted
            or str(message["channel_id"]) != channel_id
        ):
            return self._error(404, "Unknown Message", 10008)
        if message["author"]["id"] != self.bot_user["id"]:
            return self._error(403, "Missing Permissions", 50013)
        over = self._over_bucket("delete", channel_id)
        if over is not None:
            return over
        self.deleted.add(message["id"])
        self.book.record(channel_id, "delete")
        self.sent_changed.set()
        self._changed()
        return web.Response(status=204, headers=self._bucket_headers("delete", channel_id))

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        body = await request.json()
        interaction_id = request.match_info["interaction_id"]
        self.requests.append(("POST", request.path, body))
        pending = self.interactions.get(interaction_id)
        answered = any(i == interaction_id for i, _ in self.interaction_answers)
        if answered:
            return self._error(400, "Interaction has already been acknowledged.", 40060)
        if pending is None or pending[0] != request.match_info["token"]:
            return self._error(404, "Unknown interaction", 10062)
        del self.interactions[interaction_id]
        if time.monotonic() > pending[1]:
            return self._error(404, "Unknown interaction", 10062)
        kind = int(body.get("type", 0))
        if kind not in (4, 5, 6, 7, 9):
            return self._error(400, "Invalid Form Body", 50035)
        self.interaction_answers.append((interaction_id, kind))
        self.sent_changed.set()
        self._changed()
        answer = {
            "interaction": {
                "id": interaction_id,
                "type": 3,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": False,
            }
        }
        return _json(answer)

    async def _follow_up(self, request: web.Request) -> web.Response:
        """A follow-up message of an answered interaction (no bot token: the interaction's
        token is the credential). Ephemeral (flags 64): only the presser sees it."""
        body = await request.json()
        self.requests.append(("POST", request.path, body))
        known = self.interaction_tokens.get(request.match_info["token"])
        if request.match_info["application_id"] != APPLICATION_ID or known is None:
            return self._error(404, "Unknown Webhook", 10015)
        interaction_id, channel_id, presser = known
        if not any(i == interaction_id for i, _ in self.interaction_answers):
            return self._error(404, "Unknown Webhook", 10015)  # not acknowledged yet
        content = body.get("content") or ""
        if not content.strip() or len(content) > 2000:
            return self._error(400, "Invalid Form Body", 50035)
        channel = self._channel(channel_id)
        channel_type = channel["type"] if channel else 0
        message = self.message_payload(
            channel_id=channel_id,
            author=self.bot_user,
            content=content,
            guild=channel_type != 1,
            channel_type=channel_type,
        )
        message.update(webhook_id=APPLICATION_ID, application_id=APPLICATION_ID)
        if int(body.get("flags") or 0) & 64:
            message["flags"] = 64
            self.ephemeral.append((presser, content))
        else:
            self.messages[message["id"]] = message
            self.posted.append(message["id"])
        self.sent_changed.set()
        self._changed()
        return _json(message)

    async def _get_file(self, request: web.Request) -> web.StreamResponse:
        if self.downloads_held is not None:
            await self.downloads_held.wait()
        stored = self.files.get(request.match_info["file_id"])
        query = request.query
        try:
            expires = int(query.get("ex", ""), 16) // 3600
        except ValueError:
            expires = -1
        if (
            stored is None
            or query.get("hm") != stored.signature
            or expires != stored.expires
            or self.cdn_now >= stored.expires
        ):
            # What Discord's CDN answers an unsigned, tampered or expired attachment URL.
            return web.Response(status=404, text="This content is no longer available.")
        return web.Response(body=stored.data, content_type=stored.content_type.split(";")[0])

    def bot_messages(self) -> list[dict[str, Any]]:
        """What the bot posted through REST, in order."""
        return [self.messages[message_id] for message_id in self.posted]


class ChannelHistory:
    """``GET /channels/{id}/messages``: what Discord keeps of a channel, read back.

    As on Discord: ``limit`` 1-100 (default 50); at most one of ``before``, ``after``,
    ``around``; the page always newest first, also for ``after``, where it holds the
    messages right after that id (discord.py pages on from the first element). Everything
    posted in the channel is here, whether or not a gateway session ever saw it."""

    DEFAULT_LIMIT, MAX_LIMIT = 50, 100

    def __init__(self, standin: DiscordStandIn) -> None:
        self.standin = standin
        self.reads: list[dict[str, str]] = []

    def of(self, channel_id: str) -> list[dict[str, Any]]:
        """The channel's messages, oldest first."""
        kept = (m for m in self.standin.messages.values() if m["channel_id"] == channel_id)
        return sorted(kept, key=lambda m: int(m["id"]))

    async def respond(self, request: web.Request) -> web.Response:
        standin = self.standin
        standin.requests.append(("GET", request.path, dict(request.query)))
        if not standin._authorized(request):
            return standin._error(401, "401: Unauthorized")
        channel_id = request.match_info["channel_id"]
        if standin._channel(channel_id) is None:
            return standin._error(404, "Unknown Channel", 10003)
        query = dict(request.query)
        self.reads.append({"channel_id": channel_id, **query})
        problem = self._invalid(query)
        if problem is not None:
            field, message = problem
            errors = {field: {"_errors": [{"code": "BASE_TYPE_BAD", "message": message}]}}
            return standin._error(400, "Invalid Form Body", 50035, errors=errors)
        limit = int(query.get("limit", self.DEFAULT_LIMIT))
        messages = self.of(channel_id)
        if "after" in query:
            page = [m for m in messages if int(m["id"]) > int(query["after"])][:limit]
        elif "before" in query:
            page = [m for m in messages if int(m["id"]) < int(query["before"])][-limit:]
        elif "around" in query:
            pivot = int(query["around"])
            older = [m for m in messages if int(m["id"]) <= pivot][-(limit - limit // 2) :]
            page = older + [m for m in messages if int(m["id"]) > pivot][: limit // 2]
        else:
            page = messages[-limit:]
        return _json(page[::-1], headers=standin._ratelimit_headers(4, 1.0))

    def _invalid(self, query: dict[str, str]) -> tuple[str, str] | None:
        limit = query.get("limit", str(self.DEFAULT_LIMIT))
        if not limit.isdigit() or not 1 <= int(limit) <= self.MAX_LIMIT:
            return "limit", f"Int value should be between 1 and {self.MAX_LIMIT}."
        anchors = [key for key in ("before", "after", "around") if key in query]
        if len(anchors) > 1:
            return anchors[1], "Only one of before, after and around may be given."
        if anchors and not query[anchors[0]].isdigit():
            return anchors[0], "Value is not snowflake."
        return None


def _component_problem(rows: Any) -> dict[str, str] | None:
    """Discord's checks on top-level action rows of buttons; None when they pass."""
    if not isinstance(rows, list) or len(rows) > 5:
        return {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 5 or fewer in length."}
    custom_ids: set[str] = set()
    for row in rows:
        buttons = row.get("components") if isinstance(row, dict) else None
        if row.get("type") != 1 or not isinstance(buttons, list) or not 1 <= len(buttons) <= 5:
            return {"code": "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "message": "Invalid row."}
        for button in buttons:
            custom_id = str(button.get("custom_id") or "")
            if button.get("type") != 2 or button.get("style") not in (1, 2, 3, 4):
                return {"code": "COMPONENT_TYPE_INVALID", "message": "Invalid component."}
            if not 1 <= len(custom_id) <= 100 or custom_id in custom_ids:
                return {"code": "COMPONENT_CUSTOM_ID_DUPLICATED", "message": "Invalid custom_id."}
            if len(str(button.get("label") or "")) > 80:
                return {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 80 or fewer."}
            custom_ids.add(custom_id)
    return None


def message_buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The buttons of a message's action rows, in order."""
    return [b for row in message.get("components", ()) for b in row.get("components", ())]


def _snowflake_id(value: str, aliases: dict[str, str], standin: DiscordStandIn) -> str:
    """Discord ids are integers; map any other test id to a stable snowflake."""
    if value.isdigit():
        return value
    if value not in aliases:
        aliases[value] = standin.snowflake()
    return aliases[value]


class DiscordHarness:
    """The Discord stand-in plus the adapter pointed at it (tests/standins/harness.py)."""

    channel = "discord"
    max_message_chars = 2000
    bot_user_id = BOT_USER_ID

    def __init__(self) -> None:
        self.server = DiscordStandIn()
        self._aliases: dict[str, str] = {}

    async def start(self) -> None:
        await self.server.start()

    def make_adapter(self, **overrides: Any) -> Adapter:
        from adapters.discord.adapter import DiscordAdapter
        from clawbot.settings import Settings

        values: dict[str, Any] = {
            "discord_token": self.server.token,
            "discord_api_base": self.server.api_base,
            "shutdown_timeout": 5.0,
        }
        values.update(overrides)
        return DiscordAdapter.from_settings(Settings(_env_file=None, **values))  # type: ignore[call-arg]

    async def wait_connected(self, timeout: float = 5.0) -> None:
        await asyncio.wait_for(self.server.connected.wait(), timeout)

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
        attachments: Sequence[dict[str, Any]] = (),
    ) -> str:
        """Deliver a MESSAGE_CREATE over the gateway (after the CHANNEL_CREATE/THREAD_CREATE a
        new channel or thread needs); returns its message id."""
        payload, announcements = self.compose_message(
            text,
            chat_type=chat_type,
            sender_id=sender_id,
            sender_name=sender_name,
            chat_id=chat_id,
            mention=mention,
            thread_id=thread_id,
            reply_to_bot=reply_to_bot,
            from_bot=from_bot,
            from_self=from_self,
            message_id=message_id,
            attachments=attachments,
        )
        for event, data in announcements:
            await self.server.dispatch(event, data)
        await self.server.dispatch("MESSAGE_CREATE", payload)
        return str(payload["id"])

    async def user_posts(self, text: str, **options: Any) -> str:
        """Someone posts ``text`` (options as for ``inject_message``): it is in the channel's
        history from now on, and reaches the bot over the gateway only if a bot session is
        connected right now; Discord never delivers it to a later session. Returns its id."""
        payload, announcements = self.compose_message(text, **options)
        for event, data in announcements:
            await self.server.publish(event, data)
        await self.server.publish("MESSAGE_CREATE", payload)
        return str(payload["id"])

    def compose_message(
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
        attachments: Sequence[dict[str, Any]] = (),
    ) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
        """The MESSAGE_CREATE payload Discord would send, plus the dispatches announcing any
        channel or thread it creates. Threads exist only in guilds on Discord, so a
        ``thread_id`` makes it a guild message whatever ``chat_type`` says."""
        server = self.server
        announcements: list[tuple[str, dict[str, Any]]] = []
        human = _user(_snowflake_id(sender_id, self._aliases, server), sender_name)
        if from_self:
            author = server.bot_user
        elif from_bot:
            author = _user(OTHER_BOT_ID, sender_name, bot=True)
        else:
            author = human
        guild = chat_type == "group" or thread_id is not None
        if guild:
            parent = GENERAL_CHANNEL_ID
            if chat_id:
                parent = _snowflake_id(chat_id, self._aliases, server)
            if parent not in server.channels:
                announcements.append(("CHANNEL_CREATE", server.ensure_channel(parent)))
            channel_id, channel_type = parent, int(server.channels[parent]["type"])
            if thread_id is not None:
                channel_id, channel_type = _snowflake_id(thread_id, self._aliases, server), 11
                if channel_id not in server.threads:
                    server.threads[channel_id] = server.thread_payload(channel_id, parent)
                    created = {**server.threads[channel_id], "newly_created": True}
                    announcements.append(("THREAD_CREATE", created))
        else:
            wanted = _snowflake_id(chat_id, self._aliases, server) if chat_id else None
            channel_id = server.dm_channel_for(human, wanted)
            channel_type = 1
        mentions: list[dict[str, Any]] = []
        content = text
        if mention:
            content = f"<@{BOT_USER_ID}> {text}"
            mentions.append(server.bot_user)
        reference = None
        if reply_to_bot:
            earlier = [m for m in server.bot_messages() if m["channel_id"] == channel_id]
            if earlier:
                reference = earlier[-1]
            else:
                reference = server.message_payload(
                    channel_id=channel_id,
                    author=server.bot_user,
                    content="Earlier answer",
                    guild=guild,
                    channel_type=channel_type,
                )
                server.messages[reference["id"]] = reference
        payload = server.message_payload(
            channel_id=channel_id,
            author=author,
            content=content,
            guild=guild,
            message_id=_snowflake_id(message_id, self._aliases, server) if message_id else None,
            mentions=mentions,
            reference=reference,
            attachments=attachments,
            channel_type=channel_type,
        )
        server.messages.setdefault(payload["id"], payload)
        return payload, announcements

    def library_message(self, payload: dict[str, Any]) -> Any:
        """The ``discord.Message`` discord.py builds from ``payload``, without a connection.

        Replays what the client does on READY/GUILD_CREATE/MESSAGE_CREATE using the library's
        own state object (an internal), so conversion tests get exactly the objects the
        adapter gets at run time."""
        import discord
        from discord.guild import Guild
        from discord.user import ClientUser

        from adapters.discord.gateway import intents

        state = discord.Client(intents=intents())._connection
        state.user = ClientUser(state=state, data=cast("UserPayload", self.server.bot_user))
        state._add_guild(Guild(data=cast("GuildPayload", self.server.guild_payload()), state=state))
        message = cast("MessagePayload", payload)
        channel, _guild = state._get_guild_channel(message)
        # The union the library's lookup returns is wider than Message declares; its own
        # gateway handler passes it the same way.
        return discord.Message(state=state, channel=channel, data=message)  # type: ignore[arg-type]

    def add_file(
        self,
        filename: str,
        data: bytes,
        content_type: str = "application/octet-stream",
        *,
        declared_size: int | None = None,
        duration_secs: float | None = None,
    ) -> dict[str, Any]:
        return self.server.add_file(
            GENERAL_CHANNEL_ID,
            filename,
            data,
            content_type,
            declared_size=declared_size,
            duration_secs=duration_secs,
        )

    # MediaHarness

    async def send_image(self, data: bytes, *, caption: str = "") -> None:
        await self.inject_message(
            caption, attachments=[self.add_file("image.jpg", data, "image/jpeg")]
        )

    async def send_voice(self, data: bytes, *, seconds: int) -> None:
        # A voice message: an Ogg attachment with its length and waveform, and no text.
        voice = self.add_file("voice-message.ogg", data, "audio/ogg", duration_secs=seconds + 0.2)
        await self.inject_message("", attachments=[voice])

    async def send_file(self, data: bytes, name: str, mime_type: str, *, caption: str = "") -> None:
        await self.inject_message(caption, attachments=[self.add_file(name, data, mime_type)])

    def lose_files(self) -> None:
        self.server.expire_attachment_urls()

    def hold_downloads(self, release: asyncio.Event) -> None:
        self.server.downloads_held = release

    def _record(self, message: dict[str, Any]) -> SentRecord:
        channel_id = str(message["channel_id"])
        thread = self.server.threads.get(channel_id)
        return SentRecord(
            chat_id=str(thread["parent_id"]) if thread else channel_id,
            text=str(message["content"]),
            thread_id=channel_id if thread else None,
            formatted=is_formatted(str(message["content"])),
            message_id=str(message["id"]),
            raw=message,
        )

    def sent(self) -> list[SentRecord]:
        return [self._record(m) for m in self.server.bot_messages()]

    def shown(self, record: SentRecord) -> SentRecord:
        return self._record(self.server.messages[record.message_id])

    def delete(self, record: SentRecord) -> None:
        self.server.deleted.add(record.message_id)

    def buttons(self, record: SentRecord) -> list[tuple[str, str]]:
        """(label, custom_id) of each button under a message the bot posted, as the record
        shows it (``shown`` gives the message as it is now)."""
        return [(b.get("label", ""), b["custom_id"]) for b in message_buttons(record.raw)]

    async def press(
        self, record: SentRecord, label: str, *, sender_id: str = "1001", sender_name: str = "Ann"
    ) -> None:
        """Press the button ``label`` under a message the bot posted, as ``sender_id``: an
        INTERACTION_CREATE. Returns once the bot answered the interaction; an AssertionError if
        it did not within 3 s (the presser would see "This interaction failed")."""
        server = self.server
        message = server.messages[record.message_id]
        # The button as the presser's client shows it (it may not know of an edit yet).
        (button,) = [b for b in message_buttons(record.raw) if b.get("label") == label]
        user = _user(_snowflake_id(sender_id, self._aliases, server), sender_name)
        channel_id = str(message["channel_id"])
        channel = server._channel(channel_id)
        assert channel is not None
        interaction_id, token = server.snowflake(), f"aW50ZXJhY3Rpb24{server.snowflake()}"
        payload: dict[str, Any] = {
            "id": interaction_id,
            "application_id": APPLICATION_ID,
            "type": 3,
            "data": {"custom_id": button["custom_id"], "component_type": 2},
            "channel_id": channel_id,
            "channel": channel,
            "message": message,
            "token": token,
            "version": 1,
            "locale": "en-US",
            "app_permissions": "2248473465835073",
            "entitlements": [],
            "authorizing_integration_owners": {"0": GUILD_ID},
            "attachment_size_limit": 10485760,
        }
        if channel.get("type") == 1:
            payload.update(user=user, context=1)
        else:
            member = {"user": user, "roles": [], "joined_at": _iso(), "deaf": False}
            payload.update(
                guild_id=GUILD_ID,
                guild_locale="en-US",
                member={**member, "mute": False, "flags": 0, "permissions": "1024"},
                context=0,
            )
        deadline = time.monotonic() + INTERACTION_ANSWER_SECONDS
        server.interactions[interaction_id] = (token, deadline)
        server.interaction_tokens[token] = (interaction_id, channel_id, sender_id)
        await server.dispatch("INTERACTION_CREATE", payload)

        async def answered() -> None:
            while True:
                server.sent_changed.clear()
                if any(i == interaction_id for i, _ in server.interaction_answers):
                    return
                await server.sent_changed.wait()

        try:
            await asyncio.wait_for(answered(), INTERACTION_ANSWER_SECONDS)
        except TimeoutError:
            raise AssertionError(f"the bot never answered interaction {interaction_id}") from None

    def private_answers(self) -> list[tuple[str, str]]:
        return list(self.server.ephemeral)

    async def wait_private(self, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        async def reached() -> None:
            while len(self.server.ephemeral) < count:
                self.server.sent_changed.clear()
                if len(self.server.ephemeral) < count:
                    await self.server.sent_changed.wait()

        await asyncio.wait_for(reached(), timeout)
        return self.private_answers()

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[SentRecord]:
        async def reached() -> None:
            while len(self.server.posted) < count:
                self.server.sent_changed.clear()
                if len(self.server.posted) < count:
                    await self.server.sent_changed.wait()

        await asyncio.wait_for(reached(), timeout)
        return self.sent()

    def fail_next_sends(self, count: int = 1, *, status: int = 429, retry_after: float = 0) -> None:
        self.server.fail_sends.extend([(status, retry_after)] * count)

    def reject_formatting_next(self) -> None:
        self.server.reject_formatting = True

    def typing_events(self) -> list[str]:
        out = []
        for channel_id in self.server.typing:
            thread = self.server.threads.get(channel_id)
            out.append(str(thread["parent_id"]) if thread else channel_id)
        return out

    @property
    def upload_limit(self) -> int:
        return self.server.uploads.limit

    @upload_limit.setter
    def upload_limit(self, limit: int) -> None:
        self.server.uploads.limit = limit

    def received_files(self) -> list[ReceivedFile]:
        return list(self.server.uploads.received)

    async def wait_files(self, count: int, timeout: float = 5.0) -> list[ReceivedFile]:
        received = self.server.uploads.received

        async def reached() -> None:
            while len(received) < count:
                self.server.sent_changed.clear()
                if len(received) < count:
                    await self.server.sent_changed.wait()

        await asyncio.wait_for(reached(), timeout)
        return self.received_files()

    async def stop(self) -> None:
        await self.server.stop()


if TYPE_CHECKING:
    _conforms: type[ButtonHarness] = DiscordHarness
    _uploads: type[FileHarness] = DiscordHarness
