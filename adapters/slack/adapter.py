"""The Slack channel: slack-bolt's AsyncApp over Socket Mode (default) or the HTTP Events API.

Two pure conversions do the platform work — :func:`event_to_inbound` (a Slack ``message`` /
``app_mention`` event -> InboundMessage) and :func:`part_to_post_args` (a rendered part ->
``chat.postMessage`` arguments) — and :class:`SlackAdapter` owns the connection lifecycle.

Choices a Slack user would notice:

* Threads. A reply goes into the thread the user wrote in (``thread_ts``); a top-level message
  gets a top-level answer. ``reply_to_message_id`` is not turned into a new thread, because that
  would move the conversation into a thread whose session differs from the channel's.
* Replies to the bot. Slack has no "reply to a message" besides threads, so a message in a
  thread the bot started counts as replying to the bot (``mentioned=True``).
* Mentions. Slack delivers a channel mention twice (``message`` and ``app_mention``, each with
  its own event id); the adapter turns the pair into one InboundMessage. Redelivery of the same
  event is passed on unchanged: deduplication is the core's job.
* Typing. Slack gives bots no typing indicator (``assistant.threads.setStatus`` exists only for
  AI-assistant apps inside assistant threads), so ``send_typing`` does nothing.
* Formatting. Parts are sent as mrkdwn; if Slack refuses a formatted part (``invalid_blocks``,
  ``msg_too_long`` ...), that part is re-sent once as plain text with mrkdwn off.
* Acknowledgement. A message event is acked (HTTP 200 / Socket Mode envelope ack) only once
  ``on_message`` returned, i.e. the message is stored; if that fails, it is not acked and Slack
  delivers it again (dedup absorbs a retry that races a slow ack). bolt acks events *before*
  running listeners unless ``process_before_response=True``, hence that flag.
* Names. Message events carry a user id only; names come from ``users.info``
  (:mod:`adapters.slack.users`), so transcripts and pairing requests show people, not ids.
* Slash commands. ``/clawbot status`` (:mod:`adapters.slack.commands`) runs clawbot's
  ``/status``; the text form still works where Slack lets it through.
* Buttons. A message's actions (approval requests) become Block Kit buttons on its last part;
  a press is acked at once and runs as the presser's command (:mod:`adapters.slack.buttons`).
  A command or press that cannot run is told to the person (:mod:`adapters.slack.interactions`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from pydantic import SecretStr
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.buttons import ACTION_IDS, blocks_for, update
from adapters.slack.commands import DEFAULT_COMMAND, command_name_problem
from adapters.slack.interactions import Interactions, post_privately
from adapters.slack.users import UserDirectory
from clawbot.channels.interface import Adapter, ChannelLimits, InboundHandler, SentMessage
from clawbot.channels.rendering import RenderedPart, render_parts
from clawbot.errors import ClawbotError, ConfigError, DeliveryError, InputError
from clawbot.messages import (
    Action,
    Attachment,
    InboundMessage,
    OutboundEdit,
    OutboundMessage,
    ReplyContext,
)

if TYPE_CHECKING:
    from clawbot.settings import Settings

log = logging.getLogger(__name__)

CHANNEL = "slack"
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_HANDLED_SUBTYPES = frozenset({"file_share", "thread_broadcast", "me_message", "bot_message"})
_UNUSABLE_FILE_MODES = frozenset({"tombstone", "hidden_by_limit", "external"})
FORMATTING_ERRORS = frozenset(
    {"invalid_blocks", "invalid_blocks_format", "msg_too_long", "invalid_attachments"}
)
"""``chat.postMessage`` errors that mean "not this formatting"; the part goes again as plain."""


class NotStored(ClawbotError):
    """A message event left unacknowledged because clawbot could not take it in; Slack
    delivers it again."""


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is on Slack, from ``auth.test``: its user id (mentions) and bot id."""

    user_id: str
    bot_id: str | None = None


# -- inbound ---------------------------------------------------------------------------------


def event_to_inbound(
    event: Any, *, bot: BotIdentity, ignore_other_bots: bool = True
) -> InboundMessage | None:
    """Normalize one Slack event; None for events that are not a usable user message.

    A malformed event is logged (its type only, never its content) and skipped, so one bad
    payload cannot stop the receive loop.
    """
    try:
        return _convert(event, bot, ignore_other_bots)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        kind = event.get("type") if isinstance(event, Mapping) else type(event).__name__
        log.warning("slack: skipped a malformed %r event (%s)", kind, type(exc).__name__)
        return None


def _convert(event: Any, bot: BotIdentity, ignore_other_bots: bool) -> InboundMessage | None:
    if not isinstance(event, Mapping):
        raise TypeError("event is not an object")
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return None
    subtype = event.get("subtype")
    if subtype is not None and subtype not in _HANDLED_SUBTYPES:
        return None  # edits, deletions, joins, topic changes ...
    user, bot_id = event.get("user"), event.get("bot_id")
    if user == bot.user_id or (bot_id and bot_id == bot.bot_id):
        return None
    if (bot_id or subtype == "bot_message") and ignore_other_bots:
        return None

    chat_id = _required_str(event, "channel")
    ts = _required_str(event, "ts")
    sender_id = user or bot_id
    if not isinstance(sender_id, str) or not sender_id:
        raise ValueError("event has no sender")
    raw_text = event.get("text") or ""
    if not isinstance(raw_text, str):
        raise TypeError("text is not a string")

    mentioned = kind == "app_mention" or any(
        match.group(1) == bot.user_id for match in _MENTION.finditer(raw_text)
    )
    text = strip_mention(raw_text, bot.user_id)

    thread_ts = event.get("thread_ts") or None
    if thread_ts is not None and not isinstance(thread_ts, str):
        raise TypeError("thread_ts is not a string")
    reply_to = None
    if thread_ts and thread_ts != ts:
        from_bot = event.get("parent_user_id") == bot.user_id
        reply_to = ReplyContext(message_id=thread_ts, from_bot=from_bot)
        mentioned = mentioned or from_bot

    attachments = tuple(
        _attachment(item)
        for item in event.get("files") or ()
        if isinstance(item, Mapping) and item.get("mode") not in _UNUSABLE_FILE_MODES
    )
    if not text and not attachments:
        return None

    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        chat_type=_chat_type(event, chat_id),
        thread_id=thread_ts,
        sender_id=sender_id,
        sender_name=_sender_name(event),
        text=text,
        message_id=ts,
        mentioned=mentioned,
        reply_to=reply_to,
        attachments=attachments,
        received_at=_sent_at(ts),
    )


def strip_mention(text: str, bot_user_id: str) -> str:
    """Drop the bot's own ``<@U…>`` mentions and undo Slack's ``&amp; &lt; &gt;`` escaping."""
    own = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>[ \t]?")
    without = own.sub("", text).strip()
    return without.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _chat_type(event: Mapping[str, Any], chat_id: str) -> Literal["dm", "group"]:
    channel_type = event.get("channel_type")
    if channel_type == "im" or (channel_type is None and chat_id.startswith("D")):
        return "dm"
    return "group"  # "channel", "group" (private channel), "mpim", or an app_mention


def _sender_name(event: Mapping[str, Any]) -> str:
    for key in ("user_profile", "bot_profile"):
        profile = event.get(key)
        if isinstance(profile, Mapping):
            for field in ("display_name", "real_name", "name"):
                value = profile.get(field)
                if isinstance(value, str) and value:
                    return value
    username = event.get("username")
    return username if isinstance(username, str) else ""


def _attachment(item: Mapping[str, Any]) -> Attachment:
    file_id = _required_str(item, "id")
    size = item.get("size")
    return Attachment(
        name=str(item.get("name") or item.get("title") or file_id),
        mime_type=str(item.get("mimetype") or "application/octet-stream"),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        ref=file_id,
    )


def _required_str(data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} is missing or not a string")
    return value


# -- outbound --------------------------------------------------------------------------------


def part_to_post_args(
    chat_id: str, thread_id: str | None, part: RenderedPart, *, formatted: bool = True
) -> dict[str, Any]:
    """``chat.postMessage`` arguments for one rendered part.

    Plain text is sent with ``mrkdwn`` off, and still with ``& < >`` escaped: Slack parses
    ``<!channel>`` and ``<url|label>`` even then, and plain text must not ping a channel.
    """
    use_markup = formatted and part.markup == "slack_mrkdwn"
    text = part.text if use_markup else _escape(part.plain)
    args: dict[str, Any] = {"channel": chat_id, "text": text, "mrkdwn": use_markup}
    if thread_id:
        args["thread_ts"] = thread_id
    return args


def edit_to_post_args(edit: OutboundEdit, limits: ChannelLimits) -> tuple[dict[str, Any], str]:
    """``part_to_post_args`` of the part of an edit's text that replaces the message (the
    last: the one that carried the buttons), and that part's plain text."""
    part = render_parts(edit.text, limits)[-1]
    return part_to_post_args(edit.chat_id, None, part), part.plain


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- the adapter -----------------------------------------------------------------------------


class SlackAdapter(Adapter):
    """Slack through slack-bolt; Socket Mode by default, the Events API over HTTP as an option."""

    name = CHANNEL
    limits = ChannelLimits(max_message_chars=4000, markup="slack_mrkdwn")
    max_send_attempts = 4
    max_retry_after = 60.0
    connect_timeout = 30.0
    ping_interval = 10.0
    """Socket Mode health-check period; slack-sdk also waits this long between reconnects."""

    def __init__(
        self,
        *,
        bot_token: SecretStr,
        app_token: SecretStr | None = None,
        signing_secret: SecretStr | None = None,
        api_base: str = "https://slack.com/api/",
        mode: Literal["socket", "http"] = "socket",
        http_host: str = "127.0.0.1",
        http_port: int = 3000,
        http_path: str = "/slack/events",
        ignore_other_bots: bool = True,
        shutdown_timeout: float = 20.0,
        command: str = DEFAULT_COMMAND,
    ) -> None:
        self._bot_token = bot_token
        self._app_token = app_token
        self._signing_secret = signing_secret
        self._api_base = api_base
        self._mode = mode
        self._http_host, self._http_port, self._http_path = http_host, http_port, http_path
        self._ignore_other_bots = ignore_other_bots
        self._shutdown_timeout = shutdown_timeout
        # retry_handlers=[]: a library-level retry of chat.postMessage after a lost response
        # could post twice; send() retries rate limits itself, where it knows it is safe.
        self._client = AsyncWebClient(
            token=bot_token.get_secret_value(), base_url=api_base, retry_handlers=[]
        )
        self._command = command
        self._users = UserDirectory(self._client)
        self._bot: BotIdentity | None = None
        self._on_message: InboundHandler | None = None
        self._accepting = False
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._files: aiohttp.ClientSession | None = None
        self._seen: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._inflight: set[asyncio.Task[Any]] = set()
        self._interactions = Interactions(
            taking=self._taking, named=self._named, inflight=self._inflight
        )

    def __repr__(self) -> str:
        return f"SlackAdapter(mode={self._mode!r}, api_base={self._api_base!r})"

    # -- settings ------------------------------------------------------------------------------

    @classmethod
    def is_configured(cls, settings: Settings) -> bool:
        return settings.slack_bot_token is not None

    @classmethod
    def check_settings(cls, settings: Settings) -> list[str]:
        return settings_problems(settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> SlackAdapter:
        problems = cls.check_settings(settings)
        if problems or settings.slack_bot_token is None:
            raise ConfigError("the Slack channel is misconfigured: " + "; ".join(problems))
        return cls(
            bot_token=settings.slack_bot_token,
            app_token=settings.slack_app_token,
            signing_secret=settings.slack_signing_secret,
            api_base=settings.slack_api_base,
            mode=settings.slack_mode,
            http_host=settings.slack_http_host,
            http_port=settings.slack_http_port,
            http_path=settings.slack_http_path,
            ignore_other_bots=settings.ignore_other_bots,
            shutdown_timeout=settings.shutdown_timeout,
            command=settings.slack_command,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def bot(self) -> BotIdentity | None:
        """The bot's identity once started."""
        return self._bot

    async def start(self, on_message: InboundHandler) -> None:
        if self._on_message is not None:
            raise RuntimeError("the Slack adapter is already started")
        self._bot = await self._identify()
        self._on_message = on_message
        app = AsyncApp(
            # The bot token travels in the client; passing token= too only earns a warning.
            client=self._client,
            signing_secret=_secret(self._signing_secret),
            # bolt answers Slack only after the listener returned: the ack follows storage.
            process_before_response=True,
            raise_error_for_unhandled_request=False,
        )
        app.event("message")(self._on_event)
        app.event("app_mention")(self._on_event)
        app.event(re.compile(".*"))(_acknowledge_only)
        app.command(self._command)(self._interactions.on_command)
        app.action(ACTION_IDS)(self._interactions.on_press)
        app.error(_log_listener_error)
        self._accepting = True
        try:
            if self._mode == "http":
                await self._serve_http(app)
            else:
                await self._connect_socket(app)
        except BaseException:
            await self.stop()
            raise

    async def _identify(self) -> BotIdentity:
        try:
            auth = await self._client.auth_test()
        except SlackApiError as exc:
            raise ConfigError(
                f"Slack rejected the bot token ({_error_code(exc)})",
                hint="check CLAWBOT_SLACK_BOT_TOKEN",
            ) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ClawbotError(
                f"cannot reach Slack at {self._api_base} ({type(exc).__name__})",
                hint="check the network and CLAWBOT_SLACK_API_BASE",
            ) from None
        bot_id = auth.get("bot_id")
        return BotIdentity(user_id=str(auth["user_id"]), bot_id=str(bot_id) if bot_id else None)

    async def _connect_socket(self, app: AsyncApp) -> None:
        app_token = _secret(self._app_token)
        # Opening the first URL here turns a bad app token into a clear error; slack-sdk's own
        # connect() would retry it forever. Later URLs (reconnects) slack-sdk opens itself.
        try:
            opened = await self._client.apps_connections_open(app_token=app_token)
        except SlackApiError as exc:
            raise ConfigError(
                f"Slack rejected the app-level token ({_error_code(exc)})",
                hint="check CLAWBOT_SLACK_APP_TOKEN (xapp-…, with connections:write)",
            ) from None
        handler = AsyncSocketModeHandler(
            app, app_token=app_token, web_client=self._client, ping_interval=self.ping_interval
        )
        self._socket = handler
        handler.client.wss_uri = str(opened["url"])
        try:
            async with asyncio.timeout(self.connect_timeout):
                await handler.connect_async()  # type: ignore[no-untyped-call]
        except TimeoutError:
            raise ClawbotError(
                "cannot open the Slack Socket Mode connection",
                hint="check the network; Slack may be unavailable",
            ) from None

    async def _serve_http(self, app: AsyncApp) -> None:
        async def events(request: web.Request) -> web.Response:
            response = await app.async_dispatch(await to_bolt_request(request))
            return await to_aiohttp_response(response)

        web_app = web.Application()
        web_app.router.add_post(self._http_path, events)
        runner = web.AppRunner(web_app, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        self._runner = runner
        await web.TCPSite(runner, self._http_host, self._http_port).start()
        log.info("slack: Events API endpoint on %s:%s%s", *self.http_address, self._http_path)

    @property
    def http_address(self) -> tuple[str, int]:
        """Where the HTTP Events API endpoint listens (the bound port, in HTTP mode)."""
        if self._runner is not None and self._runner.addresses:
            host, port = self._runner.addresses[0][:2]
            return str(host), int(port)
        return self._http_host, self._http_port

    async def stop_intake(self) -> None:
        """Close the event connection (Socket Mode or the HTTP endpoint); the Web API client
        stays usable, so turns still running can post their replies until ``stop``."""
        self._accepting = False
        socket, self._socket = self._socket, None
        runner, self._runner = self._runner, None
        try:
            async with asyncio.timeout(self._shutdown_timeout):
                if socket is not None:
                    await socket.close_async()  # type: ignore[no-untyped-call]
                if runner is not None:
                    await runner.cleanup()
        except TimeoutError:
            log.warning("slack: closing the event connection timed out")

    async def stop(self) -> None:
        self._accepting = False
        self._on_message = None
        socket, self._socket = self._socket, None
        runner, self._runner = self._runner, None
        files, self._files = self._files, None
        try:
            async with asyncio.timeout(self._shutdown_timeout):
                if socket is not None:
                    await socket.close_async()  # type: ignore[no-untyped-call]
                if runner is not None:
                    await runner.cleanup()
                others = self._inflight - {asyncio.current_task()}  # stop() from a callback
                if others:
                    await asyncio.wait(others)
        except TimeoutError:
            log.warning("slack: stop timed out; cancelling what is left")
        for task in self._inflight - {asyncio.current_task()}:
            task.cancel()
        if files is not None:
            await files.close()

    async def _on_event(self, event: dict[str, Any]) -> None:
        """bolt listener for ``message`` and ``app_mention``. bolt answers Slack when this
        returns (``process_before_response``): returning acks the event, after ``on_message``
        stored it; raising leaves it unacked, so Slack delivers it again."""
        handler, bot = self._on_message, self._bot
        if not self._accepting or handler is None or bot is None:
            raise NotStored("slack: not taking messages (stopping); Slack will deliver it again")
        if _second_delivery(self._seen, event):
            return
        inbound = event_to_inbound(event, bot=bot, ignore_other_bots=self._ignore_other_bots)
        if inbound is None:
            return
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            if not inbound.sender_name:
                inbound = await self._named(inbound)
            await handler(inbound)
        except Exception as exc:
            raise NotStored(
                f"slack: message {inbound.message_id} in {inbound.chat_id} could not be taken in "
                f"({type(exc).__name__}); left unacknowledged, so Slack will deliver it again"
            ) from exc
        finally:
            if task is not None:
                self._inflight.discard(task)

    def _taking(self) -> InboundHandler | None:
        """The message handler while messages are taken; None while stopping."""
        return self._on_message if self._accepting else None

    async def _named(self, inbound: InboundMessage) -> InboundMessage:
        """The message with its sender's Slack name, if ``users.info`` knows it."""
        name = await self._users.name(inbound.sender_id)
        if not name or name == inbound.sender_name:
            return inbound
        return inbound.model_copy(update={"sender_name": name})

    # -- outbound ------------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> list[SentMessage]:
        sent: list[SentMessage] = []
        parts = render_parts(message.text, self.limits)
        if message.private_to and await post_privately(
            self._client,
            message.private_to,
            [part_to_post_args(message.chat_id, message.thread_id, part) for part in parts],
        ):
            return [SentMessage(channel=CHANNEL, chat_id=message.chat_id)]
        for index, part in enumerate(parts):
            actions = message.actions if index == len(parts) - 1 else ()
            ts = await self._post_part(message.chat_id, message.thread_id, part, actions)
            sent.append(SentMessage(channel=CHANNEL, chat_id=message.chat_id, message_id=ts))
        return sent

    async def _post_part(
        self,
        chat_id: str,
        thread_id: str | None,
        part: RenderedPart,
        actions: tuple[Action, ...] = (),
    ) -> str:
        """Post one part; with ``actions``, as blocks with buttons. A part Slack refuses as
        formatted goes again as plain text, without blocks (its text names the commands)."""
        formatted = part.markup == "slack_mrkdwn"
        with_blocks = bool(actions)
        rate_limited = 0
        while True:
            args = part_to_post_args(chat_id, thread_id, part, formatted=formatted)
            if with_blocks:
                shown = args["text"] if args["mrkdwn"] else part.plain
                args["blocks"] = blocks_for(shown, actions, markup=args["mrkdwn"])
            try:
                response = await self._client.chat_postMessage(**args)
                return str(response.get("ts") or "")
            except SlackApiError as exc:
                error = _error_code(exc)
                if exc.response.status_code == 429 or error == "ratelimited":
                    rate_limited += 1
                    if rate_limited >= self.max_send_attempts:
                        raise DeliveryError(
                            f"Slack kept rate-limiting messages to chat {chat_id}"
                        ) from None
                    await asyncio.sleep(_retry_after(exc, self.max_retry_after))
                    continue
                if (formatted or with_blocks) and error in FORMATTING_ERRORS:
                    log.info("slack: formatted part refused (%s); sending it as plain text", error)
                    formatted = with_blocks = False
                    continue
                raise DeliveryError(
                    f"Slack refused a message to chat {chat_id} ({error})"
                ) from None
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise DeliveryError(
                    f"cannot reach Slack to deliver to chat {chat_id} ({type(exc).__name__})"
                ) from None

    async def edit(self, edit: OutboundEdit) -> None:  # see slack_buttons.update
        await update(self._client, edit, *edit_to_post_args(edit, self.limits))

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Nothing: Slack has no typing indicator for bots (see the module docstring)."""

    # -- attachments ---------------------------------------------------------------------------

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """Download a file via ``files.info`` + ``url_private_download`` (bot token needed),
        refusing anything over ``max_bytes`` before and while reading."""
        if attachment.size is not None and attachment.size > max_bytes:
            raise _too_large(attachment, max_bytes)
        try:
            info = await self._client.files_info(file=attachment.ref)
        except SlackApiError as exc:
            raise InputError(
                f"cannot fetch the Slack file {attachment.name!r} ({_error_code(exc)})"
            ) from None
        file = info.get("file") or {}
        size = file.get("size")
        if isinstance(size, int) and size > max_bytes:
            raise _too_large(attachment, max_bytes)
        url = file.get("url_private_download") or file.get("url_private")
        if not isinstance(url, str) or not self._is_slack_url(url):
            raise InputError(f"the Slack file {attachment.name!r} has no downloadable URL")
        if self._files is None or self._files.closed:
            self._files = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        headers = {"Authorization": f"Bearer {self._bot_token.get_secret_value()}"}
        try:
            async with self._files.get(url, headers=headers) as response:
                if response.status != 200 or (
                    response.content_type == "text/html" and "html" not in attachment.mime_type
                ):
                    raise InputError(
                        f"Slack did not hand out the file {attachment.name!r} "
                        f"(HTTP {response.status})",
                        hint="the bot token needs the files:read scope",
                    )
                data = bytearray()
                async for chunk in response.content.iter_chunked(64 * 1024):
                    data += chunk
                    if len(data) > max_bytes:
                        raise _too_large(attachment, max_bytes)
                return bytes(data)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise InputError(
                f"cannot download the Slack file {attachment.name!r} ({type(exc).__name__})"
            ) from None

    def _is_slack_url(self, url: str) -> bool:
        """Only Slack's own hosts (or the configured API host) ever see the bot token."""
        host = (urlsplit(url).hostname or "").lower()
        return host == (urlsplit(self._api_base).hostname or "").lower() or (
            host == "slack.com" or host.endswith((".slack.com", ".slack-edge.com"))
        )


def settings_problems(settings: Settings) -> list[str]:
    """What is wrong with the Slack settings, one line each, never showing a secret."""
    problems = _check_token(
        "CLAWBOT_SLACK_BOT_TOKEN", settings.slack_bot_token, "xoxb-", "a bot token"
    )
    if settings.slack_mode == "socket":
        problems += _check_token(
            "CLAWBOT_SLACK_APP_TOKEN",
            settings.slack_app_token,
            "xapp-",
            "an app-level token (needed for Socket Mode)",
        )
    else:
        secret = settings.slack_signing_secret
        if secret is None or not secret.get_secret_value().strip():
            problems.append(
                "CLAWBOT_SLACK_SIGNING_SECRET is not set (needed for CLAWBOT_SLACK_MODE=http)"
            )
        elif _has_space(secret.get_secret_value()):
            problems.append("CLAWBOT_SLACK_SIGNING_SECRET contains spaces or line breaks")
        if not settings.slack_http_path.startswith("/"):
            problems.append("CLAWBOT_SLACK_HTTP_PATH must start with '/'")
    if urlsplit(settings.slack_api_base).scheme not in ("http", "https"):
        problems.append("CLAWBOT_SLACK_API_BASE must be an http(s) URL")
    command_problem = command_name_problem(settings.slack_command)
    if command_problem:
        problems.append(command_problem)
    return problems


async def _log_listener_error(error: Exception) -> None:
    """bolt's error handler: one clear line; the response stays an error (no ack)."""
    if isinstance(error, NotStored):
        cause = error.__cause__
        log.error("%s", error, exc_info=cause if cause is not None else False)
    else:
        log.error("slack: a listener failed (%s)", type(error).__name__, exc_info=error)


async def _acknowledge_only() -> None:
    """Events clawbot does not use still get acked, or Slack would redeliver them."""


def _check_token(env_name: str, token: SecretStr | None, prefix: str, what: str) -> list[str]:
    if token is None or not token.get_secret_value().strip():
        return [f"{env_name} is not set (it should be {what}, starting with {prefix})"]
    value = token.get_secret_value()
    if _has_space(value):
        return [f"{env_name} contains spaces or line breaks"]
    if not value.startswith(prefix):
        return [f"{env_name} does not look like {what}: it should start with {prefix}"]
    return []


def _has_space(value: str) -> bool:
    return any(ch.isspace() for ch in value)


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


def _second_delivery(seen: OrderedDict[tuple[str, str], str], event: Any) -> bool:
    """Whether this is the ``app_mention`` twin of a ``message`` already handled (or the
    reverse), by the (channel, ts) pairs ``seen`` so far. The same event type arriving again
    is a redelivery and is passed on."""
    if not isinstance(event, Mapping):
        return False
    channel, ts, kind = event.get("channel"), event.get("ts"), event.get("type")
    if not isinstance(channel, str) or not isinstance(ts, str) or not isinstance(kind, str):
        return False
    first = seen.setdefault((channel, ts), kind)
    if len(seen) > 2048:
        seen.popitem(last=False)
    return first != kind


def _retry_after(exc: SlackApiError, cap: float) -> float:
    """Seconds Slack's ``Retry-After`` asks for, within ``[0, cap]``; 1 when it says none."""
    headers = exc.response.headers or {}
    for key, value in headers.items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return min(max(float(raw), 0.0), cap)
            except (TypeError, ValueError):
                break
    return 1.0


def _error_code(exc: SlackApiError) -> str:
    data = exc.response.data if exc.response is not None else None
    if isinstance(data, Mapping):
        return str(data.get("error") or "unknown_error")
    return f"HTTP {exc.response.status_code}" if exc.response is not None else "unknown_error"


def _too_large(attachment: Attachment, max_bytes: int) -> InputError:
    return InputError(
        f"the file {attachment.name!r} is larger than the {max_bytes}-byte limit",
        hint="send a smaller file or raise CLAWBOT_ATTACHMENT_MAX_BYTES",
    )


def _sent_at(ts: str | None) -> datetime:
    """When Slack says the message was sent (its ``ts`` is epoch seconds): a retried event
    is not a flood. Now, when it cannot be read."""
    try:
        return datetime.fromtimestamp(float(ts or ""), UTC)
    except (ValueError, OverflowError, OSError):
        return datetime.now(UTC)
