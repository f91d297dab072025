"""Serving the console: the checks on where it listens, the login token printed once as a
login URL, and uvicorn on an asyncio loop shared with the bot (``clawbot run --console``)
or of its own (``clawbot console``).

Where it may listen: loopback by default. Another interface is the setting
``console_host`` (``clawbot doctor`` warns), and without TLS (``console_tls_cert`` and
``console_tls_key``) it is refused unless ``console_allow_plain_http`` says otherwise: the
login token and the cookies would cross the network in clear."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn

from clawbot.console.app import console_app
from clawbot.console.auth import login_url, new_token
from clawbot.console.context import ConsoleContext
from clawbot.errors import ConfigError
from clawbot.redaction import redactor
from clawbot.settings import Settings

log = logging.getLogger("clawbot.console")


def listening_problem(settings: Settings) -> str | None:
    """Why the console may not listen where the settings say, or None."""
    if not settings.console_exposed or settings.console_tls:
        return None
    if settings.console_allow_plain_http:
        return None
    return (
        f"the console would listen on {settings.console_host} without TLS: its login token "
        "and cookies would cross the network in clear"
    )


def exposure_warning(settings: Settings) -> str | None:
    """What ``clawbot doctor`` says of a console that listens beyond this machine."""
    if not settings.console_exposed:
        return None
    how = "over TLS" if settings.console_tls else "WITHOUT TLS"
    return (
        f"the web console listens on {settings.console_host} ({how}): other machines can "
        "reach its login page; CLAWBOT_CONSOLE_HOST=127.0.0.1 keeps it on this machine"
    )


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process that runs it owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ConsoleServer:
    """The console listening on ``host:port`` (port 0: a free one) until :meth:`stop`."""

    def __init__(self, context: ConsoleContext, *, host: str, port: int) -> None:
        problem = listening_problem(context.settings)
        if problem is not None:
            raise ConfigError(
                problem,
                hint="set CLAWBOT_CONSOLE_TLS_CERT and CLAWBOT_CONSOLE_TLS_KEY, keep "
                "CLAWBOT_CONSOLE_HOST=127.0.0.1 (an SSH tunnel reaches it), or set "
                "CLAWBOT_CONSOLE_ALLOW_PLAIN_HTTP=true",
            )
        self.context = context
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> str:
        """Listen, and return the login URL with a fresh token (print it once: only its
        hash is stored, and it is masked in every log line from now on)."""
        settings = self.context.settings
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"the console cannot listen on {self.host}:{self.port}: {exc.strerror}",
                hint="pick another port with --port (or CLAWBOT_CONSOLE_PORT)",
            ) from None
        sock.listen(128)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            console_app(self.context),
            log_config=None,
            access_log=False,  # a login URL in an access log would hand the token on
            lifespan="off",
            ssl_certfile=settings.console_tls_cert,
            ssl_keyfile=settings.console_tls_key,
            timeout_graceful_shutdown=2,
            server_header=False,
        )
        self.context.logs.attach()
        token = await new_token(self.context)
        redactor.add(token)
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        url = login_url(self.host, self.port, token, tls=settings.console_tls)
        log.info("web console listening on %s:%d", self.host, self.port)
        return url

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.context.logs.detach()
