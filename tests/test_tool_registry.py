"""ToolRegistry.execute: what the model and the log get when a tool fails unexpectedly."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from clawbot.messages import ToolCallBlock
from clawbot.routing.sessions import Session
from clawbot.settings import Settings
from clawbot.tools.registry import MAX_ERROR_CHARS, ToolContext, ToolRegistry, make_tool


async def test_a_huge_unexpected_error_is_clipped_in_the_result_and_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def echo_back(text: str) -> str:
        """Fails repeating its whole argument, as some libraries' errors do."""
        raise ValueError(f"cannot use {text!r}")

    context = ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="main"),
        workspace=tmp_path,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
    )
    call = ToolCallBlock(id="1", name="echo_back", arguments={"text": "x" * 10_000})

    with caplog.at_level(logging.WARNING, logger="clawbot.tools"):
        result = await ToolRegistry([make_tool(echo_back)]).execute(call, context)

    assert result.is_error
    assert result.content.startswith("error: ValueError: cannot use 'xxx")
    assert len(result.content) <= len("error: ") + MAX_ERROR_CHARS
    (logged,) = [r.getMessage() for r in caplog.records if r.name == "clawbot.tools"]
    assert logged.startswith("tool echo_back failed: ValueError: cannot use 'xxx")
    assert len(logged) <= len("tool echo_back failed: ") + MAX_ERROR_CHARS
