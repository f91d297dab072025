"""MCP servers as tools: a real MCP server (tests/mcp_servers/toolbox.py, the official SDK)
over stdio and over streamable HTTP on 127.0.0.1, its tools called through real turns of
the scripted model."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from clawbot.agents.profiles import AgentSpec
from clawbot.app import Clawbot
from clawbot.mcp.plugin import McpServers
from clawbot.policies import ToolPolicy
from clawbot.routing.router import Handled
from clawbot.runtime.plugins import TurnPlugin
from clawbot.settings import Settings
from clawbot.settings.mcp import McpServer
from clawbot.testing import MemoryChannel, ScriptedModel, call
from clawbot.tools.registry import Tool, make_tool

from .conftest import Chat
from .test_approvals import is_request, request_id

TOOLBOX = Path(__file__).resolve().parent / "mcp_servers" / "toolbox.py"
TOKEN = "tbx-7Hq2Lw9Zr4Kd8Vn1"
OFFERED = [
    "toolbox__add",
    "toolbox__echo",
    "toolbox__token_length",
    "toolbox__environment_names",
    "toolbox__wait_forever",
    "toolbox__crash",
    "toolbox__fail",
    "toolbox__grow",
    "toolbox__get_time",
]


def stdio_server(**fields: Any) -> McpServer:
    return McpServer(
        command=sys.executable,
        args=(str(TOOLBOX), "stdio"),
        env={"TOOLBOX_TOKEN": SecretStr(TOKEN)},
        **fields,
    )


@pytest.fixture
def http_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The toolbox serving streamable HTTP on a free 127.0.0.1 port: the socket is bound
    and listening before the server starts, so the first request waits in its queue."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(TOOLBOX), "http", str(listener.fileno())],
        pass_fds=[listener.fileno()],
        env={**os.environ, "TOOLBOX_TOKEN": TOKEN},
        stderr=subprocess.DEVNULL,
    )
    listener.close()
    try:
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.kill()
        process.wait(30)


@pytest.fixture
def http_url(http_server: tuple[str, subprocess.Popen[bytes]]) -> str:
    return http_server[0]


OpenBot = Callable[..., Awaitable[Clawbot]]


@pytest.fixture
async def open_bot(settings: Settings) -> AsyncIterator[OpenBot]:
    """Open the bot with ``servers`` as its ``[mcp_servers]`` (and other settings changed)."""
    async with AsyncExitStack() as stack:

        async def opened(
            servers: dict[str, McpServer], *, plugins: tuple[TurnPlugin, ...] = (), **changes: Any
        ) -> Clawbot:
            configured = settings.model_copy(
                update={"mcp_servers": servers, "mcp_backoff": 0.01, **changes}
            )
            bot = await stack.enter_async_context(await Clawbot.open(configured, plugins=plugins))
            bot.connect(MemoryChannel())
            return bot

        yield opened


def servers_of(bot: Clawbot) -> McpServers:
    plugin = bot.runtime.plugins.named("mcp")
    assert isinstance(plugin, McpServers)
    return plugin


async def until(bot: Clawbot, server: str, state: str, check: Any = None) -> None:
    """Wait for a server's state (the plug-in's changes wake it); a minute at most, so a
    state never reached fails the test instead of hanging it."""
    args = (server, state) if check is None else (server, state, check)
    await asyncio.wait_for(servers_of(bot).until(*args), 60)


class BoundedChat(Chat):
    """A chat whose turns take a minute at most: a call that hangs fails the test."""

    async def say(self, text: str, **fields: object) -> Handled:
        return await asyncio.wait_for(super().say(text, **fields), 60)


def chat_with(bot: Clawbot) -> tuple[Chat, MemoryChannel]:
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    return BoundedChat(bot, channel), channel


def mcp_tools(names: list[str]) -> list[str]:
    return [n for n in names if "__" in n]


async def test_a_stdio_servers_tools_are_offered_as_name__tool_with_their_schemas(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _channel = chat_with(bot)
    scripted.add("Hello.")

    await chat.say("hi")

    request = scripted.requests[0]
    assert mcp_tools(request.tool_names) == OFFERED
    add = next(t for t in request.tools if t["function"]["name"] == "toolbox__add")
    assert add["function"]["parameters"]["required"] == ["a", "b"]
    assert add["function"]["parameters"]["properties"]["a"]["type"] == "integer"
    assert add["function"]["description"] == "Add two whole numbers. (MCP server toolbox)"


async def test_a_call_runs_on_the_server_and_its_output_reaches_the_model_as_untrusted_data(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, channel = chat_with(bot)
    scripted.add(call("toolbox__add", a=2, b=3), "It is 5.")

    await chat.say("what is 2 + 3?")

    assert scripted.requests[1].messages[-1]["content"] == (
        '<tool-output tool="toolbox__add" trust="untrusted">\n5\n</tool-output>'
    )
    assert channel.texts[-1] == "It is 5."
    records = [r for r in await bot.store.audit.all() if r.kind == "tool_call"]
    assert [(r.tool, r.arguments, r.status) for r in records] == [
        ("toolbox__add", {"a": 2, "b": 3}, "ok")
    ]


async def test_arguments_that_break_the_servers_schema_never_reach_it(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__add", a="two"), "Sorry.")

    await chat.say("what is two plus?")

    assert scripted.requests[1].tool_results == [
        "error: invalid arguments: arguments: Value error, a: 'two' is not of type 'integer'; "
        "arguments: 'b' is a required property — call the tool again with arguments that "
        "match its JSON schema"
    ]


async def test_a_streamable_http_server_is_listed_and_called_with_its_headers(
    open_bot: OpenBot, scripted: ScriptedModel, http_url: str
) -> None:
    server = McpServer(url=http_url, headers={"Authorization": SecretStr(f"Bearer {TOKEN}")})
    bot = await open_bot({"toolbox": server})
    chat, _channel = chat_with(bot)
    scripted.add(call("toolbox__echo", text="over HTTP"), "Echoed.")

    await chat.say("echo")

    assert mcp_tools(scripted.requests[0].tool_names) == OFFERED
    assert scripted.requests[1].tool_results == ["over HTTP"]


async def test_a_streamable_http_server_that_refuses_the_headers_is_reported_and_offers_nothing(
    open_bot: OpenBot, scripted: ScriptedModel, http_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = McpServer(url=http_url, headers={"Authorization": SecretStr("Bearer wrong-token")})
    bot = await open_bot({"toolbox": server}, mcp_backoff=3600)
    chat, _ = chat_with(bot)
    scripted.add("Hello.")

    await chat.say("hi")

    assert mcp_tools(scripted.requests[0].tool_names) == []
    status = servers_of(bot).statuses()[0]
    assert status.state == "failed"
    assert next(r.message for r in caplog.records if r.name == "clawbot.mcp").startswith(
        "MCP server toolbox failed to start:"
    )


async def test_enabled_tools_offers_only_the_servers_tools_it_lists(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server(enabled_tools=("add", "echo"))})
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__fail"), "Not mine.")

    await chat.say("hi")

    assert mcp_tools(scripted.requests[0].tool_names) == ["toolbox__add", "toolbox__echo"]
    assert (
        scripted.requests[1]
        .tool_results[0]
        .startswith("error: tool 'toolbox__fail' is not available to this agent")
    )


async def test_an_agent_whose_policy_denies_a_server_is_neither_offered_nor_runs_its_tools(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _channel = chat_with(bot)
    await bot.agents.create(
        AgentSpec(
            agent_id="quiet",
            name="quiet",
            model=scripted.model_string,
            tools=ToolPolicy(deny=("group:mcp:toolbox",)),
        )
    )
    await chat.say("/agent quiet")
    scripted.add(call("toolbox__add", a=1, b=1), "No.")

    await chat.say("add")

    assert mcp_tools(scripted.requests[0].tool_names) == []
    assert (
        scripted.requests[1]
        .tool_results[0]
        .startswith("error: tool 'toolbox__add' is not available to this agent")
    )
    records = [r for r in await bot.store.audit.all() if r.kind == "tool_call"]
    assert [(r.tool, r.status) for r in records] == [("toolbox__add", "refused")]


async def test_a_servers_tools_are_guarded_by_default_and_ask_a_person(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()}, autonomy="supervised")
    _chat, channel = chat_with(bot)
    scripted.add(call("toolbox__add", a=1, b=2), "Asked.")

    receipt = await bot.router.receive(channel.message("add"))
    request = await asyncio.wait_for(channel.sent_when(is_request), 60)

    assert f"Approval needed ({request_id(request)}): toolbox__add — guarded" in request.text
    await bot.router.handle(channel.message(f"/deny {request_id(request)}"))
    await asyncio.wait_for(receipt.wait(), 60)


async def test_a_server_set_safe_runs_its_tools_without_asking(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server(risk="safe")}, autonomy="supervised")
    chat, channel = chat_with(bot)
    scripted.add(call("toolbox__add", a=1, b=2), "Three.")

    await chat.say("add")

    assert scripted.requests[1].tool_results == ["3"]
    assert not any("Approval needed" in t for t in channel.texts)


async def test_a_slow_tool_is_given_up_after_the_timeout_and_the_turn_goes_on(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server(timeout=0.2)})
    chat, channel = chat_with(bot)
    scripted.add(call("toolbox__wait_forever"), call("toolbox__add", a=1, b=1), "Two.")

    await chat.say("wait, then add")

    assert scripted.requests[1].tool_results == [
        "error: wait_forever on MCP server toolbox gave no answer in 0.2 s — it was given up; "
        "try again or do without it"
    ]
    assert scripted.requests[2].tool_results[-1] == "2"  # the server still answers
    assert channel.texts[-1] == "Two."


async def test_an_error_the_server_reports_is_an_error_result(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__fail"), "It failed.")

    await chat.say("fail")

    assert scripted.requests[1].tool_results == [
        "error: Error executing tool fail: the toolbox is out of order"
    ]


async def test_a_server_that_dies_mid_call_gives_an_error_result_and_its_tools_leave_the_list(
    open_bot: OpenBot, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await open_bot({"toolbox": stdio_server()}, mcp_backoff=3600)
    chat, channel = chat_with(bot)
    scripted.add(call("toolbox__crash"), "It crashed.")
    scripted.add("Still here.")

    await chat.say("crash it")
    await until(bot, "toolbox", "failed")
    await chat.say("hello?")

    assert scripted.requests[1].tool_results == [
        "error: MCP server toolbox closed the connection during the call — it is being "
        "restarted; try again later"
    ]
    assert mcp_tools(scripted.requests[0].tool_names) == OFFERED
    assert mcp_tools(scripted.requests[2].tool_names) == []
    assert channel.texts[-1] == "Still here."
    died = [r.message for r in caplog.records if r.name == "clawbot.mcp" and "died" in r.message]
    assert died == [
        "MCP server toolbox died: the server closed the connection; its tools are withdrawn, "
        "retrying in 300 s (then with a growing wait)"  # the backoff, at most its maximum
    ]


async def test_a_streamable_http_server_that_dies_mid_call_gives_an_error_result(
    open_bot: OpenBot, scripted: ScriptedModel, http_url: str
) -> None:
    server = McpServer(
        url=http_url, headers={"Authorization": SecretStr(f"Bearer {TOKEN}")}, timeout=600
    )
    bot = await open_bot({"toolbox": server}, mcp_backoff=3600)
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__crash"), "It crashed.")
    scripted.add("Still here.")

    await chat.say("crash it")
    await until(bot, "toolbox", "failed")
    await chat.say("hello?")

    assert scripted.requests[1].tool_results == [
        "error: MCP server toolbox closed the connection during the call — it is being "
        "restarted; try again later"
    ]
    assert mcp_tools(scripted.requests[2].tool_names) == []


async def test_a_dead_server_is_started_again_and_its_tools_come_back(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__crash"), "It crashed.")
    scripted.add(call("toolbox__add", a=20, b=22), "42.")

    await chat.say("crash it")
    await until(bot, "toolbox", "failed")
    await until(bot, "toolbox", "connected")
    await chat.say("add")

    assert mcp_tools(scripted.requests[2].tool_names) == OFFERED
    assert scripted.requests[3].tool_results[-1] == "42"


async def test_a_server_that_cannot_start_is_reported_once_and_the_bot_runs_without_it(
    open_bot: OpenBot, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    missing = McpServer(command=str(tmp_path / "no-such-server"), env={"KEY": SecretStr(TOKEN)})
    bot = await open_bot({"ghost": missing, "toolbox": stdio_server()})
    chat, _channel = chat_with(bot)
    scripted.add("Hello.")

    for _ in range(3):  # failed, tried again (a growing wait), failed again
        await until(bot, "ghost", "connecting")
        await until(bot, "ghost", "failed")
    await chat.say("hi")

    assert mcp_tools(scripted.requests[0].tool_names) == OFFERED
    reports = [r for r in caplog.records if r.name == "clawbot.mcp" and "ghost" in r.message]
    assert [r.levelno for r in reports] == [logging.WARNING] + [logging.DEBUG] * (len(reports) - 1)
    assert (
        reports[0]
        .getMessage()
        .startswith("MCP server ghost failed to start: cannot run its command:")
    )
    assert TOKEN not in caplog.text


async def test_tools_with_a_malformed_schema_or_name_are_skipped_with_one_warning_each(
    open_bot: OpenBot, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _ = chat_with(bot)
    scripted.add("Hello.")

    await chat.say("hi")

    assert mcp_tools(scripted.requests[0].tool_names) == OFFERED
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().endswith("skipped")]
    assert warnings == [
        "MCP server toolbox: tool get_time: its name toolbox__get_time is also that of its "
        "tool 'get.time'; it is skipped",
        "MCP server toolbox: tool broken: its input schema is malformed: 'no-such-type' is not "
        "valid under any of the given schemas; it is skipped",
        'MCP server toolbox: tool listed: its input schema is not of "type": "object"; it is '
        "skipped",
        f"MCP server toolbox: tool long_{'x' * 60}: its name toolbox__long_{'x' * 60} is longer "
        "than 64 characters; it is skipped",
    ]


async def test_two_of_a_servers_tools_that_make_one_name_keep_the_first_naming_both(
    open_bot: OpenBot, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})

    status = servers_of(bot).statuses()[0]

    assert "get_time: its name toolbox__get_time is also that of its tool 'get.time'" in (
        status.skipped
    )
    made = bot.tools.get("toolbox__get_time")
    assert made is not None and made.description.startswith("The time, one way.")


class Taken(TurnPlugin):
    """A plug-in whose tool has the name an MCP server's tool would get."""

    name = "taken"

    def tools(self) -> list[Tool]:
        async def toolbox__add() -> str:
            """Not the server's."""
            return "mine"

        return [make_tool(toolbox__add)]


async def test_a_tool_whose_name_is_taken_is_refused_at_start_naming_both(
    open_bot: OpenBot, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await open_bot({"toolbox": stdio_server()}, plugins=(Taken(),))
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__add"), "Mine.")

    await chat.say("add")

    assert scripted.requests[1].tool_results == ["mine"]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        "MCP server toolbox's tool toolbox__add is refused: a built-in or plug-in tool has "
        "that name already; rename one or leave it out of enabled_tools"
    ]


async def test_the_env_reaches_the_server_and_its_secrets_stay_out_of_reprs(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__token_length"), "Done.")

    await chat.say("how long is your token?")

    assert scripted.requests[1].tool_results == [str(len(TOKEN))]
    assert TOKEN not in repr(bot.settings)
    assert TOKEN not in repr(bot.settings.mcp_servers)
    assert TOKEN in bot.settings.secret_values()  # so logs mask it


async def test_a_stdio_server_gets_its_env_but_none_of_clawbots_own(
    open_bot: OpenBot, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-mcp-servers")
    monkeypatch.setenv("CLAWBOT_TELEGRAM_TOKEN", "123:not-for-mcp-servers")
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__environment_names"), "Done.")

    await chat.say("what is in your environment?")

    names = scripted.requests[1].tool_results[0].split(",")
    assert "TOOLBOX_TOKEN" in names
    assert "PATH" in names
    assert not [n for n in names if n.startswith(("OPENAI", "CLAWBOT"))]


async def test_an_idle_streamable_http_server_that_dies_is_noticed_and_its_tools_withdrawn(
    open_bot: OpenBot, scripted: ScriptedModel, http_server: tuple[str, subprocess.Popen[bytes]]
) -> None:
    url, process = http_server
    server = McpServer(url=url, headers={"Authorization": SecretStr(f"Bearer {TOKEN}")})
    bot = await open_bot({"toolbox": server}, mcp_backoff=3600, mcp_ping_interval=0.05)
    chat, _ = chat_with(bot)
    scripted.add("Hello.")

    process.kill()
    process.wait(30)
    await until(bot, "toolbox", "failed")
    await chat.say("hi")

    assert mcp_tools(scripted.requests[0].tool_names) == []


async def test_tools_a_server_adds_while_connected_are_offered_from_then_on(
    open_bot: OpenBot, scripted: ScriptedModel
) -> None:
    bot = await open_bot({"toolbox": stdio_server()})
    chat, _ = chat_with(bot)
    scripted.add(call("toolbox__grow"), "Grown.")
    scripted.add(call("toolbox__extra"), "Used it.")

    await chat.say("grow")
    await until(bot, "toolbox", "connected", lambda s: "toolbox__extra" in s.tools)
    await chat.say("use the new tool")

    assert "toolbox__extra" not in scripted.requests[0].tool_names
    assert "toolbox__extra" in scripted.requests[2].tool_names
    assert scripted.requests[3].tool_results[-1] == "extra"


async def test_a_server_that_never_answers_is_given_up_and_the_bot_starts_without_it(
    open_bot: OpenBot, scripted: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    mute = McpServer(command=sys.executable, args=("-c", "import time; time.sleep(600)"))
    bot = await asyncio.wait_for(
        open_bot({"mute": mute}, mcp_connect_timeout=0.5, mcp_backoff=3600), 60
    )
    chat, _ = chat_with(bot)
    scripted.add("Hello.")

    await chat.say("hi")

    assert mcp_tools(scripted.requests[0].tool_names) == []
    assert servers_of(bot).statuses()[0].error == "it did not answer in time"
    assert "MCP server mute failed to start: it did not answer in time" in caplog.text
