"""An MCP server's tools as clawbot tools: named ``NAME__TOOL``, offered with the JSON schema
the server gave (checked first: a malformed one keeps that tool out), arguments validated
against it before the call, the server's risk level, and the result as text.

Kept apart from the connection so a tool is a plain clawbot ``Tool``: the registry, the
policy, approvals and the audit treat it like every other one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema
from mcp import types
from pydantic import BaseModel, ConfigDict, model_validator

from clawbot.errors import ToolError
from clawbot.settings.mcp import McpServer
from clawbot.tools.registry import Tool

SEPARATOR = "__"
GROUP = "group:mcp"
"""Every MCP tool's group; ``group:mcp:NAME`` holds one server's (for a policy's lists)."""
MAX_NAME = 64
"""The longest tool name the providers accept (OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``)."""
MAX_DESCRIPTION = 1000
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]")

McpCall = Callable[[str, dict[str, Any]], Awaitable[str]]
"""Calls one tool of the server by its own name: the result as text, or a ToolError."""


class McpSchemaError(ToolError):
    """A tool the server listed cannot be offered (its schema or name is malformed)."""

    hint = "fix the tool in the MCP server; its other tools are offered"


class McpToolError(ToolError):
    """The server answered a call with an error, or did not answer it."""


def tool_name(server: str, tool: str) -> str:
    """``NAME__TOOL``, the characters providers refuse in a name made ``_``."""
    return f"{server}{SEPARATOR}{_UNSAFE_CHARS.sub('_', tool)}"


def mcp_tool(server: str, config: McpServer, listed: types.Tool, call: McpCall) -> Tool:
    """``listed`` (from the server's tools/list) as a clawbot tool that runs through
    ``call``; raises McpSchemaError when it cannot be offered."""
    name = tool_name(server, listed.name)
    if len(name) > MAX_NAME:
        raise McpSchemaError(f"its name {name} is longer than {MAX_NAME} characters")
    schema = dict(listed.inputSchema)
    if schema.get("type") != "object":
        raise McpSchemaError('its input schema is not of "type": "object"')
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise McpSchemaError(f"its input schema is malformed: {exc.message}") from None
    schema.pop("$schema", None)
    validator = validator_class(schema)
    own_name = listed.name

    async def run(arguments: dict[str, Any]) -> str:
        return await call(own_name, arguments)

    description = " ".join((listed.description or listed.title or own_name).split())
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1] + "…"
    return Tool(
        name=name,
        description=f"{description} (MCP server {server})",
        parameters=schema,
        function=run,
        arguments_model=_arguments_model(validator),
        risk=config.risk,
        groups=(GROUP, f"{GROUP}:{server}"),
        refusal=f"the agent's tool policy or the [mcp_servers.{server}] enabled_tools list",
    )


def _arguments_model(validator: Any) -> type[BaseModel]:
    """A model that checks a call's arguments against the server's schema and hands them
    on whole (the registry calls the tool with its fields: here the one ``arguments``)."""

    class Arguments(BaseModel):
        model_config = ConfigDict(frozen=True)

        arguments: dict[str, Any]

        @model_validator(mode="before")
        @classmethod
        def _against_schema(cls, data: Any) -> Any:
            problems = [
                f"{'.'.join(str(p) for p in error.absolute_path) or 'arguments'}: {error.message}"
                for error in validator.iter_errors(data)
            ]
            if problems:
                raise ValueError("; ".join(sorted(problems)[:5]))
            return {"arguments": data}

    return Arguments


def result_text(result: types.CallToolResult) -> str:
    """What the model reads of a call's result: its text, and a line for each part that is
    not text. A result the server marked as an error raises McpToolError."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type}: {block.mimeType}, not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[resource: {resource.uri}, {resource.mimeType or 'binary'}]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(parts)
    if result.isError:
        raise McpToolError(text or "the MCP server reported an error without a message")
    return text
