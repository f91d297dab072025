"""How Slack's events reach the adapter: over Socket Mode (the default) or the HTTP Events
API, into bolt's app, acked only once the listener returned; what clawbot does not use is
acked at once, and a message that could not be stored is left unacked (``NotStored``).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.sending import error_code
from clawbot.errors import ClawbotError, ConfigError

log = logging.getLogger(__name__)


class NotStored(ClawbotError):
    """A message event left unacknowledged because clawbot could not take it in; Slack
    delivers it again."""


async def socket_mode_handler(
    app: AsyncApp, client: AsyncWebClient, app_token: str, ping_interval: float
) -> AsyncSocketModeHandler:
    """A Socket Mode handler for ``app``, on the first URL opened here: that turns a bad app
    token into a clear error; slack-sdk's own connect() would retry it forever. Later URLs
    (reconnects) slack-sdk opens itself."""
    try:
        opened = await client.apps_connections_open(app_token=app_token)
    except SlackApiError as exc:
        raise ConfigError(
            f"Slack rejected the app-level token ({error_code(exc)})",
            hint="check CLAWBOT_SLACK_APP_TOKEN (xapp-…, with connections:write)",
        ) from None
    handler = AsyncSocketModeHandler(
        app, app_token=app_token, web_client=client, ping_interval=ping_interval
    )
    handler.client.wss_uri = str(opened["url"])
    return handler


async def connect_socket(handler: AsyncSocketModeHandler, timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            await handler.connect_async()  # type: ignore[no-untyped-call]
    except TimeoutError:
        raise ClawbotError(
            "cannot open the Slack Socket Mode connection",
            hint="check the network; Slack may be unavailable",
        ) from None


async def events_endpoint(app: AsyncApp, path: str) -> web.AppRunner:
    """The HTTP Events API endpoint for ``app`` at ``path``, set up, not yet listening."""

    async def events(request: web.Request) -> web.Response:
        response = await app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

    web_app = web.Application()
    web_app.router.add_post(path, events)
    runner = web.AppRunner(web_app, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    return runner


async def log_listener_error(error: Exception) -> None:
    """bolt's error handler: one clear line; the response stays an error (no ack)."""
    if isinstance(error, NotStored):
        cause = error.__cause__
        log.error("%s", error, exc_info=cause if cause is not None else False)
    else:
        log.error("slack: a listener failed (%s)", type(error).__name__, exc_info=error)


async def acknowledge_only() -> None:
    """Events clawbot does not use still get acked, or Slack would redeliver them."""
