"""MCP servers from the operator's side: ``[mcp_servers.NAME]`` tables in clawbot.toml,
``clawbot mcp list`` and the doctor's lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clawbot.cli.checks import mcp_checks
from clawbot.errors import ConfigError
from clawbot.settings import load_settings

from .test_cli import CLAWBOT, environment
from .test_mcp import TOKEN, TOOLBOX

TOOLBOX_TABLE = f"""
[mcp_servers.toolbox]
command = {str(sys.executable)!r}
args = [{str(TOOLBOX)!r}, "stdio"]
env = {{ TOOLBOX_TOKEN = "{TOKEN}" }}
enabled_tools = ["add", "echo", "broken"]
"""
GHOST_TABLE = """
[mcp_servers.ghost]
command = "/nonexistent/mcp-server"
"""


def mcp_list(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLAWBOT, "mcp", "list"],
        env=environment(cwd / "home"),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_mcp_list_shows_each_server_its_status_and_its_tools(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text(TOOLBOX_TABLE + GHOST_TABLE)

    listed = mcp_list(tmp_path)

    assert listed.stdout.splitlines() == [
        f"toolbox  ok  stdio: {sys.executable}",
        "  tools: toolbox__add, toolbox__echo",
        "  skipped: broken: its input schema is malformed: 'no-such-type' is not valid under "
        "any of the given schemas",
        "ghost  failed  stdio: /nonexistent/mcp-server",
        "  error: cannot run its command: [Errno 2] No such file or directory: "
        "'/nonexistent/mcp-server'",
    ]
    assert listed.returncode == 1  # a server that does not start is a problem
    assert TOKEN not in listed.stdout + listed.stderr


def test_mcp_list_without_servers_says_how_to_add_one(tmp_path: Path) -> None:
    listed = mcp_list(tmp_path)

    assert listed.stdout.strip() == (
        "no MCP servers configured: add [mcp_servers.NAME] tables to clawbot.toml (docs/mcp.md)"
    )
    assert listed.returncode == 0


async def test_the_doctor_says_which_servers_start_and_which_do_not(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text(TOOLBOX_TABLE + GHOST_TABLE)

    checks = await mcp_checks(load_settings(home=tmp_path / "home"))

    assert [check.line for check in checks] == [
        "ok       mcp toolbox: 2 tools; 1 skipped (clawbot mcp list)",
        "problem  mcp ghost: cannot run its command: [Errno 2] No such file or directory: "
        "'/nonexistent/mcp-server' — check its command or url (stdio: /nonexistent/mcp-server)",
    ]


def test_a_table_with_neither_command_nor_url_is_refused_with_an_example(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text('[mcp_servers.files]\nargs = ["x"]\n')

    with pytest.raises(ConfigError, match=r"give either command .* or url .*e.g. command = "):
        load_settings()


def test_a_server_name_with_a_double_underscore_is_refused(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text('[mcp_servers.my__files]\ncommand = "x"\n')

    with pytest.raises(ConfigError, match="'my__files' is not an MCP server name"):
        load_settings()


def test_env_and_header_values_never_show_in_the_settings_repr(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text(
        TOOLBOX_TABLE + f'[mcp_servers.web]\nurl = "http://127.0.0.1:1/mcp"\n'
        f'headers = {{ Authorization = "Bearer {TOKEN}x" }}\n'
    )

    settings = load_settings()

    assert TOKEN not in repr(settings)
    assert {TOKEN, f"Bearer {TOKEN}x"} <= set(settings.secret_values())
