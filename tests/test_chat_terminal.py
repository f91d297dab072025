"""``clawbot chat`` in a terminal: a person typing sees the conversation, not log lines."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

from .standins.openai_api import OpenAIStandin
from .test_cli import CLAWBOT, environment

DEADLINE = 60.0


def typed_in_a_terminal(env: dict[str, str], cwd: Path, line: bytes, until: bytes) -> bytes:
    """Run ``clawbot chat`` on a pseudo-terminal, type ``line``, and return everything it
    showed (stdout and stderr both) up to ``until``; then it is stopped."""
    main, secondary = pty.openpty()
    process = subprocess.Popen(
        [*CLAWBOT, "chat"], stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=cwd
    )
    os.close(secondary)
    shown = b""
    try:
        os.write(main, line)
        deadline = time.monotonic() + DEADLINE
        while until not in shown:
            ready, _, _ = select.select([main], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no {until!r} on the terminal; it showed: {shown!r}"
            shown += os.read(main, 65536)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main)
    return shown


def test_a_person_in_a_terminal_sees_no_info_log_lines(tmp_path: Path) -> None:
    with OpenAIStandin(["Hello from the stand-in."]).running() as standin:
        shown = typed_in_a_terminal(
            environment(tmp_path / "home", standin), tmp_path, b"hi\n", b"Hello from the stand-in."
        )

    assert b"Hello from the stand-in." in shown
    assert b" INFO " not in shown


def test_a_log_level_that_was_set_is_kept_in_a_terminal(tmp_path: Path) -> None:
    env = environment(tmp_path / "home", None, CLAWBOT_LOG_LEVEL="INFO")
    with OpenAIStandin(["Hello from the stand-in."]).running() as standin:
        env.update(OPENAI_API_BASE=standin.base_url, OPENAI_API_KEY="sk-test-not-a-real-key-000000")
        shown = typed_in_a_terminal(env, tmp_path, b"hi\n", b"Hello from the stand-in.")

    assert b" INFO " in shown
