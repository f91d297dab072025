"""Telegram intake that confirms an update only once it is stored.

Telegram forgets an update when a ``getUpdates`` call's offset passes it (long polling) or when
the webhook answers 2xx. python-telegram-bot's ``Updater`` confirms as soon as it has fetched,
while the update still waits in an in-memory queue, so a process killed in that window loses
the message. Here the offset moves past an update, and the webhook answers 200, only after the
handler returned for it (``Service.receive`` returns once the message is durable).

Both intakes still use PTB's ``Bot`` and its HTTP layer; ``BotApiRequest`` is that layer with
three repairs: one malformed update no longer blocks polling, a 404 says the API base is wrong
instead of blaming the token, and an answer that is not JSON is reported without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from http import HTTPStatus
from typing import Any

from aiohttp import web
from telegram import Bot, Message, ReplyParameters, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError, TimedOut
from telegram.request import HTTPXRequest, RequestData

from clawbot.channels.interface import NOT_TAKEN_IN

log = logging.getLogger("adapters.telegram")  # one logger for the channel, and its redaction

UpdateHandler = Callable[[Update], Awaitable[None]]

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_BACKOFF = 30.0
"""Longest pause between failed polls (PTB's own retry loop uses the same cap)."""
HANDLER_ATTEMPTS = 3
"""Polling: tries per update whose handler raised before it is skipped (its sender told so),
so a handler that keeps failing on one update cannot stop every later message. (A webhook
answers 500 instead, and Telegram's own retries take over.)"""
SETUP_ATTEMPTS = 4
"""Tries of deleteWebhook / setWebhook at start after network errors."""
CONFIRM_TIMEOUT = 5.0
"""Seconds the last getUpdates at shutdown may take to confirm the handed-over updates."""
NOTICE_TIMEOUT = 10.0
"""Seconds telling a sender their message was not taken in may take before it is given up."""


class NotTheBotApi(TelegramError):
    """``CLAWBOT_TELEGRAM_API_BASE`` answered like something other than the Bot API."""

    def __init__(self, answer: str) -> None:
        super().__init__(f"the Bot API base {answer}")
        self.answer = answer


# ---------------------------------------------------------------- HTTP layer


class BotApiRequest(HTTPXRequest):
    """PTB's HTTPX transport, repaired where the Bot API is not what answers.

    ``do_request`` and ``parse_json_payload`` are BaseRequest's documented extension points.
    """

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = HTTPXRequest.DEFAULT_NONE,
        write_timeout: Any = HTTPXRequest.DEFAULT_NONE,
        connect_timeout: Any = HTTPXRequest.DEFAULT_NONE,
        pool_timeout: Any = HTTPXRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        code, payload = await super().do_request(
            url, method, request_data, read_timeout, write_timeout, connect_timeout, pool_timeout
        )
        endpoint = url.rsplit("/", 1)[-1]  # never the URL: it carries the token
        if code == HTTPStatus.NOT_FOUND:
            # The Bot API answers 404 only for a malformed token (refused before we start) or an
            # unknown method; PTB would report it as a rejected token.
            raise NotTheBotApi(f"answered 404 Not Found to {endpoint}")
        if code == HTTPStatus.OK and endpoint == "getUpdates":
            return code, neutralize_malformed_updates(payload)
        if not HTTPStatus.OK <= code <= 299 and not _is_json(payload):
            # A proxy's HTML error page: PTB would log it, traceback and all, then put the whole
            # page in the error message. Describe it in one line instead.
            envelope = {"ok": False, "error_code": code, "description": _status_text(code)}
            return code, json.dumps(envelope).encode()
        return code, payload

    @staticmethod
    def parse_json_payload(payload: bytes) -> dict[str, Any]:
        try:
            parsed = json.loads(payload.decode("utf-8", "replace"))
        except ValueError:
            raise NotTheBotApi("answered something that is not JSON") from None
        if not isinstance(parsed, dict):
            raise NotTheBotApi("answered JSON that is not a Bot API response")
        return parsed


def _status_text(code: int) -> str:
    try:
        return f"{HTTPStatus(code).phrase} ({code})"
    except ValueError:
        return f"HTTP {code}"


def _is_json(payload: bytes) -> bool:
    try:
        json.loads(payload)
    except ValueError:
        return False
    return True


def neutralize_malformed_updates(payload: bytes) -> bytes:
    """Replace each update of a getUpdates response that PTB cannot parse by its bare id.

    PTB parses a batch all or nothing, so one unparseable update would fail every poll at the
    same offset forever; as ``{"update_id": N}`` it is confirmed like any other and ignored.
    Entries without an id cannot be confirmed on their own and are dropped.
    """
    try:
        body = json.loads(payload)
        updates = body["result"]
    except (ValueError, KeyError, TypeError):
        return payload
    if not isinstance(updates, list):
        return payload
    kept: list[Any] = []
    for raw in updates:
        update_id = raw.get("update_id") if isinstance(raw, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            log.warning("telegram: skipped an update without an id")
            continue
        try:
            Update.de_json(raw, None)
        except Exception as exc:
            log.warning("telegram: skipped malformed update %s (%s)", update_id, type(exc).__name__)
            raw = {"update_id": update_id}
        kept.append(raw)
    if kept == updates:
        return payload
    body["result"] = kept
    return json.dumps(body).encode()


def _retry_after_seconds(exc: RetryAfter) -> float:
    value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


async def with_setup_retries(action: Callable[[], Awaitable[object]], what: str) -> None:
    """Run a start-up call, retrying network errors a few times (1, 2, 4 s apart); a refused
    token or a wrong API base fails at once."""
    for attempt in range(1, SETUP_ATTEMPTS + 1):
        try:
            await action()
            return
        except (InvalidToken, NotTheBotApi):
            raise
        except RetryAfter as exc:
            if attempt == SETUP_ATTEMPTS:
                raise
            await asyncio.sleep(_retry_after_seconds(exc))
        except TelegramError as exc:
            if attempt == SETUP_ATTEMPTS:
                raise
            log.warning("telegram: %s failed (%s); retrying", what, exc.message)
            await asyncio.sleep(2.0 ** (attempt - 1))


async def hand_over(handle: UpdateHandler, update: Update, attempts: int) -> bool:
    """Give one update to the handler, up to ``attempts`` times; False if it always raised."""
    for attempt in range(1, attempts + 1):
        try:
            await handle(update)
            return True
        except Exception:
            if attempt == attempts:
                log.exception(
                    "telegram: handling update %s failed (%d of %d attempts)",
                    update.update_id,
                    attempt,
                    attempts,
                )
                return False
            log.warning(
                "telegram: handling update %s failed (%d of %d attempts); retrying",
                update.update_id,
                attempt,
                attempts,
                exc_info=True,
            )
            await asyncio.sleep(0.1 * attempt)
    return False


async def tell_not_taken_in(bot: Bot, update: Update, scrub: Callable[[str], str]) -> None:
    """Tell the chat an update came from that it was not stored and will not come again, with
    the Bot directly (the outbox may be what failed); best effort. A message gets a reply in its
    chat and topic, a button press a reply to the message the button is under (the press was
    answered already); a press without a message (an inline one) gets the query's answer."""
    query = update.callback_query
    message = update.message or update.channel_post
    if message is None and query is not None and isinstance(query.message, Message):
        message = query.message
    try:
        async with asyncio.timeout(NOTICE_TIMEOUT):
            if message is not None:
                topic = message.message_thread_id if message.is_topic_message else None
                await bot.send_message(
                    chat_id=message.chat_id,
                    text=NOT_TAKEN_IN,
                    message_thread_id=topic,
                    reply_parameters=ReplyParameters(
                        message_id=message.message_id, allow_sending_without_reply=True
                    ),
                )
            elif query is not None and query.message is not None:  # too old to be shown
                await bot.send_message(chat_id=query.message.chat.id, text=NOT_TAKEN_IN)
            elif query is not None:
                await bot.answer_callback_query(query.id, text=NOT_TAKEN_IN, show_alert=True)
    except (TelegramError, TimeoutError) as exc:
        log.warning(
            "telegram: could not tell the sender of update %s that it was lost (%s)",
            update.update_id,
            scrub(getattr(exc, "message", type(exc).__name__)),
        )


# ---------------------------------------------------------------- long polling


class PollingIntake:
    """Long polling with ``Bot.get_updates``: the offset moves past an update only once the
    handler returned for it, so Telegram keeps (and returns again) whatever was not stored.

    Errors back off as PTB's own loop does (network errors 1 s growing to 30 s, a timeout
    retried at once, a rate limit honoured); a refused token stops polling with an error.
    Stopping ends a waiting long poll at once and lets an update being handed over finish.
    """

    def __init__(
        self,
        bot: Bot,
        handle: UpdateHandler,
        *,
        timeout: int,
        allowed_updates: Sequence[str],
        scrub: Callable[[str], str],
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._timeout = timeout
        self._allowed = list(allowed_updates)
        self._scrub = scrub
        self._offset = 0
        """The next update id wanted: every id below it was handed over."""
        self._confirmed = 0
        """The offset of the last getUpdates Telegram answered (it confirmed all below)."""
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._backoff = 0.0

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Make sure no webhook is set (Telegram refuses getUpdates then), then poll."""
        await with_setup_retries(
            lambda: self._bot.delete_webhook(drop_pending_updates=False), "deleteWebhook"
        )
        self._task = asyncio.create_task(self._run(), name="telegram polling")

    async def stop(self) -> None:
        """Stop polling, then confirm what was handed over since the last poll."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await task
            except asyncio.CancelledError:
                task.cancel()
                raise
        await self._confirm_handed_over()

    async def _run(self) -> None:
        while not self._stopping.is_set():
            updates = await self._poll()
            if updates is None:
                if not await self._pause():
                    return
                continue
            for update in updates:
                if self._stopping.is_set():
                    return  # not handed over: Telegram keeps it for the next start
                if not await hand_over(self._handle, update, HANDLER_ATTEMPTS):
                    log.error("telegram: skipped update %s; later ones go on", update.update_id)
                    await tell_not_taken_in(self._bot, update, self._scrub)
                self._offset = update.update_id + 1

    async def _poll(self) -> tuple[Update, ...] | None:
        """One getUpdates, ended early by ``stop``; None after an error or when stopping."""
        offset = self._offset
        poll = asyncio.create_task(
            self._bot.get_updates(
                offset=offset or None, timeout=self._timeout, allowed_updates=self._allowed
            )
        )
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({poll, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not poll.done():
                poll.cancel()
                # Wait until the cancelled request has let go of its connection, so the
                # confirming call at shutdown finds the pool free.
                with contextlib.suppress(BaseException):
                    await poll
        if poll.cancelled():
            return None
        error = poll.exception()
        if error is not None:
            if not self._stopping.is_set():  # a poll cut short by the shutdown is no failure
                self._backoff = self._next_backoff(error)
            return None
        self._confirmed = max(self._confirmed, offset)
        self._backoff = 0.0
        return poll.result()

    def _next_backoff(self, exc: BaseException) -> float:
        """How long to wait after a failed poll, logging the failure once, clearly."""
        if isinstance(exc, InvalidToken):
            log.error(
                "telegram: Telegram rejected the bot token while polling; polling stopped — "
                "check CLAWBOT_TELEGRAM_TOKEN (was it revoked in @BotFather?) and restart"
            )
            self._stopping.set()
            return 0.0
        if isinstance(exc, RetryAfter):
            wait = _retry_after_seconds(exc) + 0.5
            log.warning("telegram: polling rate limited; waiting %.1fs", wait)
            return wait
        if isinstance(exc, TimedOut):
            log.debug("telegram: a poll timed out; polling again")
            return 0.0
        backoff = min(MAX_BACKOFF, 1.0 if self._backoff == 0 else 1.5 * self._backoff)
        if isinstance(exc, Conflict):
            log.warning(
                "telegram: polling refused (%s): is another process running this bot? "
                "Retrying in %.0fs",
                self._scrub(exc.message),
                backoff,
            )
        elif isinstance(exc, TelegramError):
            log.warning(
                "telegram: polling failed (%s); retrying in %.0fs",
                self._scrub(exc.message),
                backoff,
            )
        else:
            log.error(
                "telegram: could not read the updates (%s); retrying in %.0fs",
                type(exc).__name__,
                backoff,
            )
        return backoff

    async def _pause(self) -> bool:
        """Wait out the backoff; False when stopping."""
        if self._backoff > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._backoff)
        return not self._stopping.is_set()

    async def _confirm_handed_over(self) -> None:
        """Tell Telegram about updates handed over after the last poll, so the next start does
        not fetch them again (if this fails they come again, and deduplication drops them)."""
        if self._offset <= self._confirmed:
            return
        try:
            await asyncio.wait_for(
                self._bot.get_updates(
                    offset=self._offset, limit=1, timeout=0, allowed_updates=self._allowed
                ),
                CONFIRM_TIMEOUT,
            )
            self._confirmed = self._offset
        except (TelegramError, TimeoutError) as exc:
            log.info(
                "telegram: could not confirm the last updates at shutdown (%s); "
                "they are fetched again on the next start and recognized as seen",
                self._scrub(getattr(exc, "message", type(exc).__name__)),
            )


# ---------------------------------------------------------------- webhook


class WebhookIntake:
    """A small aiohttp server for Telegram's webhook: it answers 200 only once the handler
    returned (the message is stored), 500 when the handler failed so Telegram delivers the
    update again, and 403 to a request without the secret token. Updates are handed over one
    at a time, in the order they arrive."""

    def __init__(
        self,
        bot: Bot,
        handle: UpdateHandler,
        *,
        listen: str,
        port: int,
        path: str,
        url: str,
        secret: str,
        allowed_updates: Sequence[str],
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._listen, self._port, self._path, self._url = listen, port, path, url
        self._secret = secret.encode()
        self._allowed = list(allowed_updates)
        self._runner: web.AppRunner | None = None
        self._order = asyncio.Lock()

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self) -> None:
        """Listen first, then register the webhook (Telegram starts delivering at once)."""
        app = web.Application()
        app.router.add_post(self._path, self._receive)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=CONFIRM_TIMEOUT)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._listen, self._port).start()
            await with_setup_retries(
                lambda: self._bot.set_webhook(
                    url=self._url,
                    secret_token=self._secret.decode(),
                    allowed_updates=self._allowed,
                    drop_pending_updates=False,
                ),
                "setWebhook",
            )
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        """Stop listening and let requests being handled finish (briefly). Telegram keeps what
        was not answered with 200 and delivers it after the restart."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            return web.Response(status=HTTPStatus.FORBIDDEN)
        try:
            data = await request.json()
        except ValueError:
            return web.Response(status=HTTPStatus.BAD_REQUEST, text="not JSON")
        update_id = data.get("update_id") if isinstance(data, dict) else None
        if not isinstance(update_id, int):
            return web.Response(status=HTTPStatus.BAD_REQUEST, text="not an update")
        try:
            update = Update.de_json(data, self._bot)
        except Exception as exc:
            # It would fail the same way on every retry: confirm it and go on.
            log.warning("telegram: skipped malformed update %s (%s)", update_id, type(exc).__name__)
            return web.Response()
        async with self._order:
            handled = await hand_over(self._handle, update, attempts=1)
        if not handled:
            log.warning("telegram: answered 500 to update %s; Telegram sends it again", update_id)
            return web.Response(status=HTTPStatus.INTERNAL_SERVER_ERROR)
        return web.Response()
