"""Settings of the web console (``clawbot console``, ``clawbot run --console``)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import BaseModel, Field

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class ConsoleSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    console_host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="the interface the web console listens on; anything but loopback is "
        "reachable from other machines (`clawbot doctor` warns)",
    )
    console_port: int = Field(
        default=8765, ge=1, le=65535, description="the web console's port (--port overrides)"
    )
    console_allow_plain_http: bool = Field(
        default=False,
        description="let the console listen on every interface (0.0.0.0, ::) without TLS; "
        "its login token and cookies would cross the network in clear",
    )
    console_tls_cert: Path | None = Field(
        default=None, description="PEM certificate: the console serves HTTPS with it"
    )
    console_tls_key: Path | None = Field(
        default=None, description="PEM private key of console_tls_cert"
    )
    console_login_hours: float = Field(
        default=12.0,
        gt=0,
        le=24 * 30,
        description="hours a browser stays logged in to the console",
    )

    @property
    def console_tls(self) -> bool:
        return self.console_tls_cert is not None and self.console_tls_key is not None

    @property
    def console_exposed(self) -> bool:
        """Whether the console listens beyond this machine's loopback interface."""
        host = self.console_host.strip("[]")
        if host in LOOPBACK_HOSTS:
            return False
        try:
            return not ipaddress.ip_address(host).is_loopback
        except ValueError:
            return True  # a name: it may resolve to anything
