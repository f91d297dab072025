"""A Telegram Bot API stand-in on 127.0.0.1, plus the TelegramHarness the conformance suite drives.

It speaks the Bot API's HTTP wire format (``/bot<token>/<method>`` with form or JSON parameters,
``{"ok": ..., "result": ...}`` envelopes, ``/file/bot<token>/<path>`` downloads), so
python-telegram-bot runs unmodified against it once its base URLs point here.

Updates follow Telegram's acknowledgement rule strictly: an update stays pending, and every
``getUpdates`` returns it again, until a call arrives whose ``offset`` is greater than its id
(which confirms it and every earlier one). A second ``getUpdates`` ends the one still waiting
with 409 Conflict, as Telegram does when two processes poll one token (``conflicts`` lists
those a connected bot heard). With a webhook set, the
pending updates are POSTed to it one at a time, in order, and an update leaves the queue only
when the bot answers 2xx; a non-2xx answer or a failed connection is retried. Behind a load
balancer (:meth:`TelegramStandIn.balance_webhook`, ``tests.standins.telegram_webhooks``) they
go to several processes at once, one chat's updates at a time, as Telegram sends them.

Inline keyboards: ``reply_markup`` is checked as Telegram checks it (``callback_data`` of 1-64
bytes) and kept on the message; a press is a ``callback_query`` update, and the pressed button
spins in the user's app until the bot calls ``answerCallbackQuery`` for that query (once: a
second answer, or an unknown id, is refused as Telegram refuses it); an answer's ``text`` (at
most 200 characters) is shown to the presser alone, as an alert with ``show_alert``.
``editMessageText`` rewrites a message the bot sent (dropping its keyboard unless given one)
and refuses, as Telegram does, a message that is gone, an edit that changes nothing ("message
is not modified") and a text over 4096 UTF-16 units ("MESSAGE_TOO_LONG"). ``deleteMessage``
takes a message of the bot's away ("message to delete not found" once it is gone).

Drafts (Bot API 9.3's ``sendMessageDraft``): a private chat shows the draft's text as it grows,
for 30 seconds after its last change or until the bot sends the chat a message; any other
chat refuses it ("TEXTDRAFT_PEER_INVALID").

Flood control (:data:`TELEGRAM_RATES`, on by default): messages, edits, deletions and drafts
to one chat draw from one per-chat budget, and in a group messages, edits and deletions also
from the group's per-minute one; a call over budget is answered 429 with
``parameters.retry_after`` in whole seconds. ``book`` counts each chat's messages, edits,
deletions, drafts and refusals, and the calls that
did not wait as long as asked; ``chat_shows`` is what a chat shows in the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import Any, Literal

import aiohttp
from aiohttp import web

from clawbot.channels.harness import SentRecord
from clawbot.channels.interface import Adapter
from tests.standins.rate_rules import Limit, RateBook, SlidingWindow, TokenBucket

from .telegram_uploads import TelegramUploads, Upload
from .telegram_webhooks import DEFAULT_MAX_CONNECTIONS, BalancedWebhook
from .uploads import ReceivedFile

DEFAULT_TOKEN = "123456789:AAHstandinTOKENxxxxxxxxxxxxxxxxxxxx_"
DEFAULT_BOT_ID = 7000000001
DEFAULT_BOT_USERNAME = "clawbot_test_bot"
DEFAULT_GROUP_ID = -1001000000001
OTHER_BOT = {"id": 5550001, "is_bot": True, "first_name": "OtherBot", "username": "other_bot"}
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # the Bot API's getFile limit
MAX_REQUEST_BYTES = 60 * 1024 * 1024
"""What the server reads of one request: room for a 50 MB upload and its form."""
WEBHOOK_RETRY_SECONDS = 0.05
"""Telegram retries a failed webhook delivery after a growing pause; short here, so tests
that watch a redelivery need not wait for it."""
CONFLICT_OTHER_POLL = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)

MAX_TEXT_UNITS = 4096
"""The Bot API's limit on a message's text after entities parsing, in UTF-16 code units."""
DRAFT_SECONDS = 30.0
"""sendMessageDraft: "the streamed draft is ephemeral and acts as a temporary 30-second
preview" until the bot sends the message itself."""


PER_CHAT = TokenBucket(per_second=1.0, burst=3)
PER_GROUP = SlidingWindow(limit=20, seconds=60.0)


@dataclass(frozen=True)
class TelegramRates:
    """Telegram's flood limits for one bot, from the Bot FAQ ("My bot is hitting limits, how
    do I avoid this?", core.telegram.org/bots/faq): "When sending messages inside a particular
    chat, avoid sending more than one message per second. We may allow short bursts that go
    over this limit, but eventually you'll begin receiving 429 errors." and "your bot will not
    be able to send more than 20 messages per minute to the same group."

    ``per_chat`` (1 a second, bursts of 3) counts sendMessage, editMessageText and
    sendMessageDraft (the Bot API names no separate rate for drafts); ``per_group`` (20 in
    any 60 s) counts a group's messages and edits: edits are not messages in the FAQ's
    words, but peers report most of their flood waits coming from streamed edits, so the
    stand-in takes the strict reading."""

    per_chat: Limit = PER_CHAT
    per_group: Limit = PER_GROUP


TELEGRAM_RATES = TelegramRates()

CallObserver = Callable[[str, dict[str, Any]], None]
ResultObserver = Callable[[str, dict[str, Any], Any], None]

# Tags Telegram accepts with parse_mode=HTML; anything else is "Unsupported start tag".
_ALLOWED_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "tg-emoji",
    "code",
    "pre",
    "blockquote",
}


class ApiError(Exception):
    """A Bot API error response: HTTP status, description and optional parameters."""

    def __init__(self, status: int, description: str, parameters: dict[str, Any] | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


_ENTITY_TYPES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "span": "spoiler",
    "tg-spoiler": "spoiler",
    "a": "text_link",
    "tg-emoji": "custom_emoji",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
}


class _EntityParser(HTMLParser):
    """Checks Telegram-HTML the way the Bot API does; gathers the visible text and its
    entities (offsets and lengths in UTF-16 code units, as the Bot API gives them)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.stack: list[tuple[str, int, str | None]] = []
        self.visible: list[str] = []
        self.units = 0
        self.entities: list[dict[str, Any]] = []
        self.error: str | None = None

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason

    def _show(self, text: str) -> None:
        self.visible.append(text)
        self.units += _utf16_len(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED_TAGS:
            self._fail(f'Unsupported start tag "{tag}"')
        self.stack.append((tag, self.units, dict(attrs).get("href")))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._fail(f'Unsupported start tag "{tag}"')

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1][0] != tag:
            self._fail(f'Unexpected end tag "{tag}"')
            return
        _, start, href = self.stack.pop()
        if self.units > start and tag in _ENTITY_TYPES:
            entity: dict[str, Any] = {
                "type": _ENTITY_TYPES[tag],
                "offset": start,
                "length": self.units - start,
            }
            if href is not None:
                entity["url"] = href
            self.entities.append(entity)

    def handle_data(self, data: str) -> None:
        if "<" in data:
            self._fail("Unsupported start tag")
        self._show(data)

    def handle_entityref(self, name: str) -> None:
        known = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
        if name not in known:
            self._fail(f'Unsupported HTML entity "&{name};"')
        self._show(known.get(name, ""))

    def handle_charref(self, name: str) -> None:
        try:
            code = int(name[1:], 16) if name[:1] in "xX" else int(name)
            self._show(chr(code))
        except ValueError:
            self._fail(f'Unsupported HTML entity "&#{name};"')


def parse_telegram_html(text: str) -> str:
    """The visible text of a parse_mode=HTML message, or ApiError 400 as Telegram words it."""
    return telegram_html(text)[0]


def telegram_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The visible text and entities of a parse_mode=HTML message, or ApiError 400."""
    parser = _EntityParser()
    parser.feed(text)
    parser.close()
    if parser.error is None and parser.stack:
        parser.error = f'Can\'t find end tag corresponding to start tag "{parser.stack[-1][0]}"'
    if parser.error is not None:
        raise ApiError(400, f"Bad Request: can't parse entities: {parser.error}")
    entities = sorted(parser.entities, key=lambda e: (e["offset"], -e["length"]))
    return "".join(parser.visible), entities


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _jsonish(value: Any) -> Any:
    """Bot API form parameters carry non-string values JSON-encoded."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@dataclass(frozen=True)
class WebhookAttempt:
    """One POST of an update to the bot's webhook and how it ended (HTTP status, or None when
    the connection failed); behind a load balancer, the process that answered (None when
    none did)."""

    update_id: int
    status: int | None
    endpoint: str | None = None


@dataclass
class StoredFile:
    file_id: str
    file_unique_id: str
    file_path: str
    content: bytes


class TelegramStandIn:
    """The Bot API server: updates queue, sent messages, files (the bot's uploads in
    ``uploads``: ``tests.standins.telegram_uploads``) and injected failures.

    ``on_call`` sees each API call as it arrives, ``on_result`` each result before it is
    answered and ``on_webhook_answer`` each webhook delivery as soon as its answer (or failure)
    is known (all synchronous, on the server's loop): crash tests use them to kill the bot at
    an exact point of the exchange.
    """

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_id: int = DEFAULT_BOT_ID,
        bot_username: str = DEFAULT_BOT_USERNAME,
    ) -> None:
        self.token = token
        self.bot_user: dict[str, Any] = {
            "id": bot_id,
            "is_bot": True,
            "first_name": "Clawbot",
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.updates: list[dict[str, Any]] = []
        """Pending updates: not yet confirmed by a getUpdates offset or a 2xx webhook answer."""
        self.confirmed_through = 0
        """The highest update id the bot has confirmed."""
        self.webhook_attempts: list[WebhookAttempt] = []
        self.polls_waiting = 0
        """getUpdates calls held open right now (long polls waiting for an update)."""
        self.conflicts: list[str] = []
        """The description of each 409 Conflict a getUpdates was answered with, while its
        caller was still connected (one killed while it waited hears nothing)."""
        self.on_call: CallObserver | None = None
        self.on_result: ResultObserver | None = None
        self.on_webhook_answer: Callable[[WebhookAttempt], None] | None = None
        self.sent: list[SentRecord] = []
        self.typing: list[str] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}
        self.files: dict[str, StoredFile] = {}
        self.uploads = TelegramUploads(self)
        self.downloads_held: asyncio.Event | None = None
        """While set to an unset event, file downloads wait for it (a slow file server)."""
        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self.fail_sends: list[tuple[int, float]] = []
        self.reject_formatting = 0
        self.callback_queries: set[str] = set()
        """Callback queries pressed and not answered yet (their buttons spin)."""
        self.answered_callbacks: list[str] = []
        self.callback_from: dict[str, str] = {}
        """The id of the person who pressed each callback query."""
        self.callback_texts: list[tuple[str, str, bool]] = []
        """(query id, text, show_alert) of each answer that showed the presser a text."""
        self.edits: list[tuple[int, int]] = []
        """(chat id, message id) of each message the bot edited, in order."""
        self.deleted: list[tuple[int, int]] = []
        """(chat id, message id) of each message the bot deleted, in order."""
        self.rates = TELEGRAM_RATES
        self.book = RateBook(resolution=1.0)  # Telegram's retry_after is whole seconds
        self.drafts: dict[int, tuple[int, str, float]] = {}
        """Per private chat, the draft it shows: (draft id, text, when it last changed)."""
        self.port = 0
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(100)
        self._file_ids = itertools.count(1)
        self._query_ids = itertools.count(4_100_000_000_001)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._online = False
        self._polls = 0
        self._deliverer: asyncio.Task[None] | None = None
        self.balancer: BalancedWebhook | None = None
        """Set by :meth:`balance_webhook`: the load balancer the webhook's updates go through."""

    # server lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen on a free port (or the previous one when coming back after an outage)."""
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._online = True
        delivery = self.balancer.run() if self.balancer else self._deliver_to_webhook()
        self._deliverer = asyncio.create_task(delivery)

    async def stop(self) -> None:
        """Drop every connection, as a network loss or shutdown would."""
        self._online = False
        async with self._changed:
            self._changed.notify_all()
        if self._deliverer is not None:
            self._deliverer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._deliverer
            self._deliverer = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # inspection helpers

    async def wait_for(self, predicate: Any, timeout: float | None = 5.0) -> None:
        async def waiter() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(waiter(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def notify(self) -> None:
        """Wake whoever waits in :meth:`wait_for` (something changed)."""
        await self._notify()

    def confirm(self, update: dict[str, Any]) -> None:
        """A 2xx webhook answer: Telegram forgets the update."""
        self.updates = [u for u in self.updates if u is not update]
        self.confirmed_through = max(self.confirmed_through, update["update_id"])

    def balance_webhook(self, backends: list[str], *, seed: int) -> BalancedWebhook:
        """From now on, the webhook URL is a load balancer in front of ``backends`` (the base
        URL each process listens on): updates go out as Telegram sends them to one URL, and
        the balancer hands each to the next live process."""
        self.balancer = BalancedWebhook(
            self, backends, seed=seed, retry_seconds=WEBHOOK_RETRY_SECONDS
        )
        if self._deliverer is not None:
            self._deliverer.cancel()
        self._deliverer = asyncio.create_task(self.balancer.run())
        return self.balancer

    def next_message_id(self) -> int:
        return next(self._message_ids)

    def new_callback_query(self) -> str:
        """A fresh callback query id, pending until the bot answers it."""
        query_id = str(next(self._query_ids))
        self.callback_queries.add(query_id)
        return query_id

    def store_message(self, message: dict[str, Any]) -> None:
        self.messages[(message["chat"]["id"], message["message_id"])] = message

    def add_file(
        self, content: bytes, *, suffix: str = "bin", folder: str = "documents"
    ) -> StoredFile:
        """A file the Bot API serves (its ``file_path`` in the folder Telegram uses for its
        kind: ``documents``, ``photos``, ``voice``, ``music``)."""
        n = next(self._file_ids)
        stored = StoredFile(
            file_id=f"BQACAgIAAx{n:06d}standin",
            file_unique_id=f"AgAD{n:04d}",
            file_path=f"{folder}/file_{n}.{suffix}",
            content=content,
        )
        self.files[stored.file_id] = stored
        return stored

    async def push_update(self, update: dict[str, Any]) -> int:
        """Queue an update: getUpdates returns it, or it is POSTed to the webhook when one is
        set. Returns its update id."""
        update.setdefault("update_id", next(self._update_ids))
        self.updates.append(update)
        await self._notify()
        return int(update["update_id"])

    def _confirm_below(self, offset: int) -> None:
        """Telegram forgets every update with an id below a getUpdates ``offset``."""
        kept = [u for u in self.updates if u["update_id"] >= offset]
        if len(kept) != len(self.updates):
            self.confirmed_through = max(self.confirmed_through, offset - 1)
        self.updates = kept

    async def _deliver_to_webhook(self) -> None:
        """POST pending updates to the webhook, oldest first; drop one only on a 2xx answer."""
        async with aiohttp.ClientSession() as session:
            while True:
                async with self._changed:
                    await self._changed.wait_for(lambda: bool(self.webhook_url and self.updates))
                update, url = self.updates[0], self.webhook_url
                status = await self._post_update(session, url, update)
                attempt = WebhookAttempt(update["update_id"], status)
                self.webhook_attempts.append(attempt)
                if self.on_webhook_answer is not None:
                    self.on_webhook_answer(attempt)
                if status is not None and 200 <= status < 300:
                    if self.updates and self.updates[0] is update:
                        self.updates.pop(0)
                        self.confirmed_through = max(self.confirmed_through, update["update_id"])
                    await self._notify()
                else:
                    await self._notify()
                    await asyncio.sleep(WEBHOOK_RETRY_SECONDS)

    async def _post_update(
        self, session: aiohttp.ClientSession, url: str, update: dict[str, Any]
    ) -> int | None:
        headers = {"Content-Type": "application/json"}
        if self.webhook_secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook_secret
        try:
            async with session.post(
                url,
                data=json.dumps(update),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=60),
            ) as response:
                return response.status
        except (aiohttp.ClientError, TimeoutError):
            return None

    # HTTP handlers

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            body = await request.json()
            params.update(body or {})
        elif request.can_read_body:
            form = await request.post()
            params.update({k: _jsonish(v) for k, v in form.items() if isinstance(v, str)})
            params.update(
                {
                    k: Upload(v.filename, v.content_type, v.file.read())
                    for k, v in form.items()
                    if isinstance(v, web.FileField)
                }
            )
        return params

    async def _api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return self._error(ApiError(401, "Unauthorized"))
        method = request.match_info["method"]
        handler = getattr(self, f"_m_{method.lower()}", None) or self.uploads.method(method.lower())
        if handler is None:
            return self._error(ApiError(404, "Not Found"))
        params = await self._params(request)
        self.calls.append((method, params))
        if self.on_call is not None:
            self.on_call(method, params)
        try:
            result = await handler(params)
        except ApiError as exc:
            connected = request.transport is not None and not request.transport.is_closing()
            if exc.status == 409 and method.lower() == "getupdates" and connected:
                self.conflicts.append(exc.description)
            return self._error(exc)
        if self.on_result is not None:
            self.on_result(method, params, result)
        return web.json_response({"ok": True, "result": result})

    @staticmethod
    def _error(exc: ApiError) -> web.Response:
        body: dict[str, Any] = {
            "ok": False,
            "error_code": exc.status,
            "description": exc.description,
        }
        if exc.parameters:
            body["parameters"] = exc.parameters
        return web.json_response(body, status=exc.status)

    async def _download(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        if self.downloads_held is not None:
            await self.downloads_held.wait()
        path = request.match_info["path"]
        for stored in self.files.values():
            if stored.file_path == path:
                return web.Response(body=stored.content)
        return web.Response(status=404)

    # flood control and what a chat shows

    def _flood_check(self, chat_id: int, *, group_budget: bool = True) -> None:
        """Telegram's answer to a call over the chat's budget: 429 with ``retry_after``."""
        chat = str(chat_id)
        limits: list[tuple[str, Limit]] = [(chat, self.rates.per_chat)]
        if chat_id < 0 and group_budget:
            limits.append((chat, self.rates.per_group))
        refusal = self.book.admit(chat, limits)
        if refusal is not None:
            wait = int(refusal.retry_after) if refusal.retry_after.is_integer() else None
            seconds = wait if wait is not None else refusal.retry_after
            raise ApiError(
                429, f"Too Many Requests: retry after {seconds:g}", {"retry_after": seconds}
            )

    def chat_shows(self, chat_id: int) -> list[str]:
        """The texts of the bot's messages in a chat (a file's caption), oldest first, as
        they show now."""
        bot_id = self.bot_user["id"]
        return [
            str(message.get("text", message.get("caption", "")))
            for (cid, _), message in sorted(self.messages.items())
            if cid == chat_id and message.get("from", {}).get("id") == bot_id
        ]

    def draft_shown(self, chat_id: int) -> str | None:
        """The draft a private chat shows now, if any."""
        draft = self.drafts.get(chat_id)
        if draft is None or self.book.clock() - draft[2] > DRAFT_SECONDS:
            return None
        return draft[1]

    # Bot API methods

    async def _m_getme(self, params: dict[str, Any]) -> Any:
        return self.bot_user

    async def _m_close(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_logout(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_deletewebhook(self, params: dict[str, Any]) -> Any:
        self.webhook_url = ""
        self.webhook_secret = None
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            self.updates.clear()
        return True

    async def _m_setwebhook(self, params: dict[str, Any]) -> Any:
        url = str(params.get("url", ""))
        if not url.startswith(("http://", "https://")):
            raise ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided")
        self.webhook_url = url
        self.webhook_secret = params.get("secret_token") or None
        connections = int(params.get("max_connections") or DEFAULT_MAX_CONNECTIONS)
        if not 1 <= connections <= 100:
            raise ApiError(400, "Bad Request: bad webhook: wrong max_connections specified")
        if self.balancer is not None:
            self.balancer.set_max_connections(connections)
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            self.updates.clear()
        await self._notify()
        return True

    async def _m_getwebhookinfo(self, params: dict[str, Any]) -> Any:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self.updates),
        }

    async def _m_getupdates(self, params: dict[str, Any]) -> Any:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        if not 1 <= limit <= 100 or timeout < 0:
            raise ApiError(400, "Bad Request: wrong parameters")
        timeout = min(timeout, 50.0)
        if offset > 0:
            self._confirm_below(offset)
        elif offset < 0:  # the last -offset updates; every earlier one is forgotten
            keep = self.updates[offset:]
            if keep:
                self._confirm_below(keep[0]["update_id"])
            else:
                self.updates.clear()
        self._polls += 1
        poll = self._polls
        await self._notify()  # a poll still waiting is ended by this one

        def ready() -> bool:
            return not self._online or poll != self._polls or bool(self.updates)

        if timeout > 0 and not ready():
            self.polls_waiting += 1
            await self._notify()
            try:
                async with self._changed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait_for(ready), timeout)
            finally:
                self.polls_waiting -= 1
        if poll != self._polls:
            raise ApiError(409, CONFLICT_OTHER_POLL)
        return self.updates[:limit]

    async def _m_sendchataction(self, params: dict[str, Any]) -> Any:
        if params.get("action", "typing") == "typing":
            self.typing.append(str(params["chat_id"]))
        await self._notify()
        return True

    async def _m_getfile(self, params: dict[str, Any]) -> Any:
        stored = self.files.get(str(params.get("file_id", "")))
        if stored is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if len(stored.content) > MAX_DOWNLOAD_BYTES:
            raise ApiError(400, "Bad Request: file is too big")
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": len(stored.content),
            "file_path": stored.file_path,
        }

    async def _m_sendmessage(self, params: dict[str, Any]) -> Any:
        if self.fail_sends:
            status, retry_after = self.fail_sends.pop(0)
            if status == 429:
                raise ApiError(
                    429,
                    f"Too Many Requests: retry after {retry_after:g}",
                    {"retry_after": retry_after},
                )
            raise ApiError(status, "Internal Server Error")
        self._flood_check(int(params["chat_id"]))
        text = str(params.get("text", ""))
        parse_mode = params.get("parse_mode")
        formatted = bool(parse_mode)
        if formatted and self.reject_formatting:
            self.reject_formatting -= 1
            raise ApiError(
                400,
                'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0',
            )
        html = formatted and str(parse_mode).upper() == "HTML"
        visible, entities = telegram_html(text) if html else (text, [])
        if not visible.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if _utf16_len(visible) > MAX_TEXT_UNITS:
            raise ApiError(400, "Bad Request: message is too long")
        markup = params.get("reply_markup")
        if markup is not None:
            _check_inline_keyboard(markup)
        chat_id = int(params["chat_id"])
        chat: dict[str, Any] = {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}
        message: dict[str, Any] = {
            "message_id": self.next_message_id(),
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
            "text": visible,
        }
        if entities:
            message["entities"] = entities
        if markup is not None:
            message["reply_markup"] = markup
        thread = params.get("message_thread_id")
        if thread is not None:
            message["message_thread_id"] = int(thread)
            message["is_topic_message"] = True
        reply = params.get("reply_parameters")
        if isinstance(reply, dict) and (chat_id, reply.get("message_id")) in self.messages:
            message["reply_to_message"] = self.messages[(chat_id, reply["message_id"])]
        self.store_message(message)
        self.drafts.pop(chat_id, None)  # the message takes the draft's place
        self.book.record(str(chat_id), "message")
        self.sent.append(
            SentRecord(
                chat_id=str(chat_id),
                text=visible,
                thread_id=None if thread is None else str(thread),
                formatted=formatted,
                message_id=str(message["message_id"]),
                raw=params,
            )
        )
        await self._notify()
        return message

    async def _m_editmessagetext(self, params: dict[str, Any]) -> Any:
        """As Telegram: only the bot's own message that still exists; a new text that shows
        what the message shows already (its text, entities and keyboard) is refused; no
        ``reply_markup`` drops the keyboard."""
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        message = self.messages.get((chat_id, message_id))
        if message is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != self.bot_user["id"]:
            raise ApiError(400, "Bad Request: message can't be edited")
        self._flood_check(chat_id)
        text = str(params.get("text", ""))
        parse_mode = params.get("parse_mode")
        if parse_mode and self.reject_formatting:
            self.reject_formatting -= 1
            raise ApiError(400, "Bad Request: can't parse entities: Unsupported start tag")
        html = bool(parse_mode) and str(parse_mode).upper() == "HTML"
        visible, entities = telegram_html(text) if html else (text, [])
        if not visible.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if _utf16_len(visible) > MAX_TEXT_UNITS:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        markup = params.get("reply_markup")
        if markup is not None:
            _check_inline_keyboard(markup)
        if (visible, entities, markup) == (
            message["text"],
            message.get("entities", []),
            message.get("reply_markup"),
        ):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply"
                " markup are exactly the same as a current content and reply markup of the message",
            )
        message["text"] = visible
        message["edit_date"] = int(time.time())
        if entities:
            message["entities"] = entities
        else:
            message.pop("entities", None)
        if markup is None:
            message.pop("reply_markup", None)
        else:
            message["reply_markup"] = markup
        self.edits.append((chat_id, message_id))
        self.book.record(str(chat_id), "edit")
        await self._notify()
        return message

    async def _m_deletemessage(self, params: dict[str, Any]) -> Any:
        """As Telegram: a message that exists, and the bot's own (a bot that is no admin
        deletes no one else's); the call draws from the chat's flood budget as edits do."""
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        message = self.messages.get((chat_id, message_id))
        if message is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        if message.get("from", {}).get("id") != self.bot_user["id"]:
            raise ApiError(400, "Bad Request: message can't be deleted")
        self._flood_check(chat_id)
        del self.messages[(chat_id, message_id)]
        self.deleted.append((chat_id, message_id))
        self.book.record(str(chat_id), "delete")
        await self._notify()
        return True

    async def _m_sendmessagedraft(self, params: dict[str, Any]) -> Any:
        """As Telegram: a private chat only, a non-zero draft id, 0-4096 characters after
        entities parsing (an empty text shows "Thinking..."); the chat shows the draft's
        newest text."""
        chat_id = int(params["chat_id"])
        if chat_id <= 0:
            raise ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        draft_id = int(params.get("draft_id") or 0)
        if draft_id == 0:
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        self._flood_check(chat_id, group_budget=False)
        text = str(params.get("text") or "")
        parse_mode = params.get("parse_mode")
        if parse_mode and self.reject_formatting:
            self.reject_formatting -= 1
            raise ApiError(400, "Bad Request: can't parse entities: Unsupported start tag")
        html = bool(parse_mode) and str(parse_mode).upper() == "HTML"
        visible = parse_telegram_html(text) if html else text
        if _utf16_len(visible) > MAX_TEXT_UNITS:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        self.drafts[chat_id] = (draft_id, visible, self.book.clock())
        self.book.record(str(chat_id), "draft")
        await self._notify()
        return True

    async def _m_answercallbackquery(self, params: dict[str, Any]) -> Any:
        query_id = str(params.get("callback_query_id", ""))
        if query_id not in self.callback_queries:
            raise ApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        text = str(params.get("text") or "")
        if len(text) > 200:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        self.callback_queries.discard(query_id)
        self.answered_callbacks.append(query_id)
        if text:
            alert = str(params.get("show_alert", "")).lower() in ("true", "1")
            self.callback_texts.append((query_id, text, alert))
        await self._notify()
        return True


def _check_inline_keyboard(markup: Any) -> None:
    """Telegram's checks on an InlineKeyboardMarkup with callback buttons."""
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object")
    for button in (b for row in rows for b in row):
        data = button.get("callback_data") if isinstance(button, dict) else None
        if not isinstance(data, str) or not 1 <= len(data.encode()) <= 64:
            raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
        if not button.get("text"):
            raise ApiError(400, "Bad Request: text buttons are unallowed in the inline keyboard")


def inline_buttons(record: SentRecord) -> list[tuple[str, str]]:
    """(label, callback_data) of each button under a sent message, row by row."""
    markup = record.raw.get("reply_markup")
    if not isinstance(markup, dict):
        return []
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


class TelegramHarness:
    """The stand-in plus the real TelegramAdapter pointed at it (PlatformHarness)."""

    channel = "telegram"
    max_message_chars = 4096

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_id: int = DEFAULT_BOT_ID,
        bot_username: str = DEFAULT_BOT_USERNAME,
    ) -> None:
        self.server = TelegramStandIn(token, bot_id=bot_id, bot_username=bot_username)
        self.token = token
        self.bot_user_id = str(bot_id)
        self.bot_username = bot_username

    async def start(self) -> None:
        await self.server.start()

    async def stop(self) -> None:
        await self.server.stop()

    def settings_kwargs(self, **overrides: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "telegram_token": self.token,
            "telegram_api_base": f"{self.server.url}/bot",
            "telegram_file_base": f"{self.server.url}/file/bot",
        }
        kwargs.update(overrides)
        return kwargs

    def make_adapter(self, **overrides: Any) -> Adapter:
        from adapters.telegram.adapter import TelegramAdapter
        from clawbot.settings import Settings

        return TelegramAdapter.from_settings(Settings(**self.settings_kwargs(**overrides)))

    # inbound

    def _user(
        self, sender_id: str, sender_name: str, *, from_bot: bool, from_self: bool
    ) -> dict[str, Any]:
        if from_self:
            return dict(self.server.bot_user)
        if from_bot:
            return dict(OTHER_BOT)
        return {
            "id": int(sender_id),
            "is_bot": False,
            "first_name": sender_name,
            "language_code": "en",
        }

    def _chat(
        self,
        chat_type: Literal["dm", "group"],
        chat_id: str | None,
        sender: dict[str, Any],
        *,
        forum: bool,
    ) -> dict[str, Any]:
        if chat_type == "dm":
            return {
                "id": int(chat_id) if chat_id else sender["id"],
                "type": "private",
                "first_name": sender.get("first_name", ""),
            }
        return {
            "id": int(chat_id) if chat_id else DEFAULT_GROUP_ID,
            "type": "supergroup",
            "title": "Test group",
            "is_forum": forum,
        }

    def build_message(
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
    ) -> dict[str, Any]:
        """A Bot API Message object as Telegram would send it for these circumstances."""
        sender = self._user(sender_id, sender_name, from_bot=from_bot, from_self=from_self)
        chat = self._chat(chat_type, chat_id, sender, forum=thread_id is not None)
        entities: list[dict[str, Any]] = []
        if mention:
            handle = f"@{self.bot_username}"
            text = f"{handle} {text}"
            entities.append({"type": "mention", "offset": 0, "length": len(handle)})
        message: dict[str, Any] = {
            "message_id": int(message_id) if message_id else self.server.next_message_id(),
            "from": sender,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if thread_id is not None:
            message["message_thread_id"] = int(thread_id)
            message["is_topic_message"] = True
            # Telegram marks every topic message as a reply to the topic's creation message.
            message["reply_to_message"] = {
                "message_id": int(thread_id),
                "from": {"id": int(sender_id), "is_bot": False, "first_name": sender_name},
                "chat": chat,
                "date": int(time.time()) - 60,
                "message_thread_id": int(thread_id),
                "forum_topic_created": {"name": "Topic", "icon_color": 7322096},
                "is_topic_message": True,
            }
        if reply_to_bot:
            message["reply_to_message"] = self._bot_message_in(chat, thread_id)
        return message

    def _bot_message_in(self, chat: dict[str, Any], thread_id: str | None) -> dict[str, Any]:
        for (cid, _), stored in reversed(self.server.messages.items()):
            if cid == chat["id"] and stored["from"]["id"] == self.server.bot_user["id"]:
                return stored
        earlier: dict[str, Any] = {
            "message_id": self.server.next_message_id(),
            "from": self.server.bot_user,
            "chat": chat,
            "date": int(time.time()) - 30,
            "text": "An earlier answer from the bot",
        }
        if thread_id is not None:
            earlier["message_thread_id"] = int(thread_id)
            earlier["is_topic_message"] = True
        self.server.store_message(earlier)
        return earlier

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
    ) -> str:
        """Deliver a message update; re-injecting a ``message_id`` redelivers the same message
        in a fresh update, as Telegram does when an update was not confirmed."""
        message = self.build_message(
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
        )
        self.server.store_message(message)
        await self.server.push_update({"message": message})
        return str(message["message_id"])

    async def inject_document(
        self,
        content: bytes,
        *,
        file_name: str = "notes.txt",
        mime_type: str = "text/plain",
        caption: str = "",
        sender_id: str = "1001",
        sender_name: str = "Ann",
    ) -> tuple[str, str]:
        """A DM carrying a document; returns (message id, file id)."""
        stored = self.server.add_file(content, suffix=file_name.rsplit(".", 1)[-1])
        document = {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_name": file_name,
            "mime_type": mime_type,
            "file_size": len(content),
        }
        message_id = await self._inject_media(
            "document", document, caption, sender_id=sender_id, sender_name=sender_name
        )
        return message_id, stored.file_id

    async def inject_photo(
        self,
        content: bytes,
        *,
        caption: str = "",
        sender_id: str = "1001",
        sender_name: str = "Ann",
    ) -> tuple[str, str]:
        """A DM carrying a photo, as Telegram sends one: its sizes smallest first, a
        thumbnail (a file of its own) before the full one; returns (message id, the full
        size's file id)."""
        thumb = self.server.add_file(content[:16], suffix="jpg", folder="photos")
        full = self.server.add_file(content, suffix="jpg", folder="photos")
        sizes = [
            {"file_id": f.file_id, "file_unique_id": f.file_unique_id, "width": w, "height": w}
            | {"file_size": len(f.content)}
            for f, w in ((thumb, 90), (full, 1280))
        ]
        message_id = await self._inject_media(
            "photo", sizes, caption, sender_id=sender_id, sender_name=sender_name
        )
        return message_id, full.file_id

    async def inject_voice(
        self,
        content: bytes,
        *,
        duration: int,
        mime_type: str = "audio/ogg",
        sender_id: str = "1001",
        sender_name: str = "Ann",
    ) -> tuple[str, str]:
        """A DM carrying a voice note of ``duration`` seconds; returns (message id, file id)."""
        stored = self.server.add_file(content, suffix="oga", folder="voice")
        voice = {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "duration": duration,
            "mime_type": mime_type,
            "file_size": len(content),
        }
        message_id = await self._inject_media(
            "voice", voice, "", sender_id=sender_id, sender_name=sender_name
        )
        return message_id, stored.file_id

    # MediaHarness

    async def send_image(self, data: bytes, *, caption: str = "") -> None:
        await self.inject_photo(data, caption=caption)

    async def send_voice(self, data: bytes, *, seconds: int) -> None:
        await self.inject_voice(data, duration=seconds)

    async def send_file(self, data: bytes, name: str, mime_type: str, *, caption: str = "") -> None:
        await self.inject_document(data, file_name=name, mime_type=mime_type, caption=caption)

    def lose_files(self) -> None:
        self.server.files.clear()

    def hold_downloads(self, release: asyncio.Event) -> None:
        self.server.downloads_held = release

    async def _inject_media(
        self, kind: str, media: Any, caption: str, *, sender_id: str, sender_name: str
    ) -> str:
        message = self.build_message("", sender_id=sender_id, sender_name=sender_name)
        del message["text"]
        message[kind] = media
        if caption:
            message["caption"] = caption
        self.server.store_message(message)
        await self.server.push_update({"message": message})
        return str(message["message_id"])

    async def press(
        self,
        record: SentRecord,
        label: str,
        *,
        sender_id: str = "1001",
        sender_name: str = "Ann",
        timeout: float = 5.0,
    ) -> None:
        """Press the button ``label`` under a message the bot sent, as ``sender_id``: a
        callback_query update. Returns once the bot answered the query; an AssertionError if
        it did not (the button would spin in the user's app)."""
        (data,) = [d for text, d in inline_buttons(record) if text == label]
        message = self.server.messages[(int(record.chat_id), int(record.message_id))]
        query_id = self.server.new_callback_query()
        self.server.callback_from[query_id] = sender_id
        user = self._user(sender_id, sender_name, from_bot=False, from_self=False)
        await self.server.push_update(
            {
                "callback_query": {
                    "id": query_id,
                    "from": user,
                    "message": message,
                    "chat_instance": f"-{abs(int(record.chat_id))}77",
                    "data": data,
                }
            }
        )
        try:
            await self.server.wait_for(lambda: query_id in self.server.answered_callbacks, timeout)
        except TimeoutError:
            raise AssertionError(f"the bot never answered callback query {query_id}") from None

    def buttons(self, record: SentRecord) -> list[tuple[str, str]]:
        return inline_buttons(record)

    def private_answers(self) -> list[tuple[str, str]]:
        server = self.server
        return [(server.callback_from[query], text) for query, text, _ in server.callback_texts]

    async def wait_private(self, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        await self.server.wait_for(lambda: len(self.server.callback_texts) >= count, timeout)
        return self.private_answers()

    def shown(self, record: SentRecord) -> SentRecord:
        message = self.server.messages[(int(record.chat_id), int(record.message_id))]
        raw = {"reply_markup": message["reply_markup"]} if "reply_markup" in message else {}
        return replace(record, text=message["text"], raw=raw)

    def delete(self, record: SentRecord) -> None:
        del self.server.messages[(int(record.chat_id), int(record.message_id))]

    async def inject_update(self, update: dict[str, Any]) -> None:
        """Deliver a raw update exactly as given (for odd or malformed payloads)."""
        await self.server.push_update(update)

    # outbound observations

    def sent(self) -> list[SentRecord]:
        return list(self.server.sent)

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[SentRecord]:
        await self.server.wait_for(lambda: len(self.server.sent) >= count, timeout)
        return self.sent()

    async def wait_typing(self, count: int = 1, timeout: float = 5.0) -> list[str]:
        await self.server.wait_for(lambda: len(self.server.typing) >= count, timeout)
        return self.typing_events()

    def fail_next_sends(self, count: int = 1, *, status: int = 429, retry_after: float = 0) -> None:
        self.server.fail_sends.extend([(status, retry_after)] * count)

    def reject_formatting_next(self) -> None:
        self.server.reject_formatting += 1

    def typing_events(self) -> list[str]:
        return list(self.server.typing)

    # uploads

    @property
    def upload_limit(self) -> int:
        return self.server.uploads.limit

    @upload_limit.setter
    def upload_limit(self, limit: int) -> None:
        self.server.uploads.limit = limit

    def received_files(self) -> list[ReceivedFile]:
        return list(self.server.uploads.received)

    async def wait_files(self, count: int, timeout: float = 5.0) -> list[ReceivedFile]:
        await self.server.wait_for(lambda: len(self.server.uploads.received) >= count, timeout)
        return self.received_files()
