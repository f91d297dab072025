"""Settings of MCP servers: ``[mcp_servers.NAME]`` tables whose tools clawbot offers."""

from __future__ import annotations

import re
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from clawbot.policies import Risk

SERVER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]|_(?!_)){0,29}$")
"""A server's name: lower case, digits, ``-`` and single ``_`` (``__`` separates the server
from the tool in ``NAME__TOOL``, so no two servers can make one tool name)."""


class McpServer(BaseModel):
    """One ``[mcp_servers.NAME]`` table: a stdio ``command`` (with ``args`` and ``env``) or a
    streamable-HTTP ``url`` (with ``headers``). ``env`` and ``headers`` values are secrets:
    their repr never shows them, and logs mask them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = Field(default=None, min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, SecretStr] = Field(default_factory=dict)
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    enabled_tools: tuple[str, ...] | None = None
    """The server's tools clawbot offers, by the server's own names (all when unset)."""
    risk: Risk = "guarded"
    """The level of every tool of the server: guarded (asks once per session unless the
    autonomy is full), safe or unsafe (asks at every call)."""
    timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds one call may take; then it ends in an error result."""

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either command (a stdio server) or url (a streamable-HTTP server), "
                'e.g. command = "npx" with args = ["-y", "@modelcontextprotocol/server-memory"]'
            )
        if self.url is not None and (self.args or self.env):
            raise ValueError("args and env belong to a stdio server (command), not a url")
        if self.command is not None and self.headers:
            raise ValueError("headers belong to a streamable-HTTP server (url), not a command")
        return self

    def secret_values(self) -> list[str]:
        return [v.get_secret_value() for v in (*self.env.values(), *self.headers.values())]


class McpSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict,
        description="[mcp_servers.<name>] in clawbot.toml: MCP servers whose tools become "
        "<name>__<tool> tools (docs/mcp.md)",
    )
    mcp_connect_timeout: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="seconds an MCP server may take to start and list its tools",
    )
    mcp_backoff: float = Field(
        default=1.0,
        gt=0,
        le=3600,
        description="seconds before the first reconnection of an MCP server that failed or "
        "died; doubled at each failure in a row, up to CLAWBOT_MCP_BACKOFF_MAX",
    )
    mcp_backoff_max: float = Field(
        default=300.0, gt=0, le=86_400, description="the longest wait between reconnections"
    )
    mcp_ping_interval: float = Field(
        default=30.0,
        gt=0,
        le=86_400,
        description="seconds between pings that tell an idle MCP server died",
    )

    @field_validator("mcp_servers", mode="after")
    @classmethod
    def _server_names(cls, value: dict[str, McpServer]) -> dict[str, McpServer]:
        for name in value:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not an MCP server name: up to 30 lower-case letters, "
                    "digits, - and single _ (e.g. github or my-files)"
                )
        return value

    def mcp_secret_values(self) -> list[str]:
        """Every MCP server's env and header values, for redaction."""
        return [value for server in self.mcp_servers.values() for value in server.secret_values()]
