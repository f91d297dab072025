"""The Slack channel: slack-bolt's AsyncApp over Socket Mode (default) or the HTTP Events API.

Two pure conversions do the platform work — ``event_to_inbound`` (a Slack ``message`` /
``app_mention`` event -> InboundMessage, :mod:`adapters.slack.inbound`) and
``part_to_post_args`` (a rendered part -> ``chat.postMessage`` arguments,
:mod:`adapters.slack.sending`) — and :class:`SlackAdapter` owns the connection lifecycle
(Socket Mode or HTTP: :mod:`adapters.slack.connections`).

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
* Rate limits. A 429 is raised as ``RateLimitedError`` with Slack's ``Retry-After`` for the
  chat's pacer to wait out (slack-sdk's own retry handlers are off: see ``__init__``), but
  for a later part of a message, which is waited out here (:mod:`adapters.slack.sending`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal

import aiohttp
from aiohttp import web
from pydantic import SecretStr
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.buttons import ACTION_IDS
from adapters.slack.commands import DEFAULT_COMMAND
from adapters.slack.connections import (
    NotStored,
    acknowledge_only,
    connect_socket,
    events_endpoint,
    log_listener_error,
    socket_mode_handler,
)
from adapters.slack.downloads import SlackFiles
from adapters.slack.edits import delete_message, one_part, update
from adapters.slack.files import MAX_UPLOAD_BYTES, upload
from adapters.slack.inbound import BotIdentity, event_to_inbound, second_delivery
from adapters.slack.interactions import Interactions, post_privately
from adapters.slack.sending import error_code, part_to_post_args, post_part
from adapters.slack.setting_checks import settings_problems
from adapters.slack.users import UserDirectory
from clawbot.channels.interface import Adapter, ChannelLimits, InboundHandler, SentMessage
from clawbot.channels.rendering import render_parts
from clawbot.errors import ClawbotError, ConfigError, DeliveryError
from clawbot.messages import (
    Attachment,
    InboundMessage,
    OutboundDeletion,
    OutboundEdit,
    OutboundFile,
    OutboundMessage,
)

if TYPE_CHECKING:
    from clawbot.settings import Settings

log = logging.getLogger(__name__)

CHANNEL = "slack"
LIMITS = ChannelLimits(
    max_message_chars=4000,
    markup="slack_mrkdwn",
    # chat.postMessage: "one message per second per channel".
    message_interval=1.0,
    # chat.update is Tier 3, "50+ per minute" for the whole workspace: one edit every 1.2 s.
    edit_interval=1.2,
    max_upload_bytes=MAX_UPLOAD_BYTES,
    max_caption_chars=4000,
)


class SlackAdapter(Adapter):
    """Slack through slack-bolt; Socket Mode by default, the Events API over HTTP as an option."""

    name = CHANNEL
    limits = LIMITS
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
        # could post twice; a 429 goes to the chat's pacer, which waits as long as Slack asks.
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
        self._downloads = SlackFiles(self._client, bot_token, api_base)
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
        app.event(re.compile(".*"))(acknowledge_only)
        app.command(self._command)(self._interactions.on_command)
        app.action(ACTION_IDS)(self._interactions.on_press)
        app.error(log_listener_error)
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
                f"Slack rejected the bot token ({error_code(exc)})",
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
        handler = await socket_mode_handler(
            app, self._client, _secret(self._app_token), self.ping_interval
        )
        self._socket = handler
        await connect_socket(handler, self.connect_timeout)

    async def _serve_http(self, app: AsyncApp) -> None:
        runner = await events_endpoint(app, self._http_path)
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
        await self._downloads.close()

    async def _on_event(self, event: dict[str, Any]) -> None:
        """bolt listener for ``message`` and ``app_mention``. bolt answers Slack when this
        returns (``process_before_response``): returning acks the event, after ``on_message``
        stored it; raising leaves it unacked, so Slack delivers it again."""
        handler, bot = self._on_message, self._bot
        if not self._accepting or handler is None or bot is None:
            raise NotStored("slack: not taking messages (stopping); Slack will deliver it again")
        if second_delivery(self._seen, event):
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
            try:
                ts = await post_part(
                    self._client,
                    message.chat_id,
                    message.thread_id,
                    part,
                    actions,
                    attempts=self.max_send_attempts,
                    max_wait=self.max_retry_after,
                    wait_out=bool(sent),
                )
            except DeliveryError as exc:
                if not sent:
                    raise  # nothing was posted: a RateLimitedError may be sent again whole
                raise DeliveryError(
                    f"{exc.message} (after {len(sent)} of {len(parts)} parts were delivered)"
                ) from None
            sent.append(SentMessage(channel=CHANNEL, chat_id=message.chat_id, message_id=ts))
        return sent

    async def send_file(self, file: OutboundFile) -> list[SentMessage]:
        """The file shared into the chat (``adapters.slack.files``)."""
        ts = await upload(self._client, file, self.limits)
        return [SentMessage(channel=CHANNEL, chat_id=file.chat_id, message_id=ts)]

    async def edit(self, edit: OutboundEdit) -> None:
        """``chat.update`` to a text that fits one message, without buttons; raises
        ``RateLimitedError`` when Slack asks to wait (see ``adapters.slack.edits``)."""
        await update(self._client, edit, one_part(edit.text, self.limits))

    async def delete(self, deletion: OutboundDeletion) -> None:
        """``chat.delete``; ``RateLimitedError`` when Slack asks to wait."""
        await delete_message(self._client, deletion)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Nothing: Slack has no typing indicator for bots (see the module docstring)."""

    # -- attachments ---------------------------------------------------------------------------

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """Download a file via ``files.info`` + ``url_private_download`` (bot token needed),
        refusing anything over ``max_bytes`` before and while reading."""
        return await self._downloads.fetch(attachment, max_bytes)


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""
