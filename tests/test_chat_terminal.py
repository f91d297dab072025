"""``clawbot chat`` in a terminal: a person typing sees the conversation, not log lines."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .standins.openai_api import OpenAIStandin, Reply
from .test_cli import CLAWBOT, environment, run

DEADLINE = 60.0
IN_ITS_TERMINAL = [
    sys.executable,
    "-c",
    "import fcntl, os, signal, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGQUIT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]
"""Run the rest of the command line with its stdin's terminal as its controlling terminal,
as a shell does (in a session of its own): Ctrl-C typed there is its SIGINT. As an
interactive shell does, SIGINT and SIGQUIT are set back to their defaults: a test run
started in the background (``cmd &`` in a script) ignores them, and a child inherits that
(the Ctrl-C test hung in such runs: SigIgn 0x1001007)."""


def _signal_state(pid: int) -> str:
    """The process's signal masks and what it is doing, for a failure message: a Ctrl-C
    that changed nothing is told apart from one that was blocked or ignored."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        stack = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as exc:
        return f"process {pid}: {exc}"
    masks = [line for line in status if line.startswith(("State", "Sig", "Threads"))]
    return f"process {pid}: {'; '.join(masks)}; waiting in {stack or '-'}"


Step = tuple[bytes | Callable[[], None], bytes | Callable[[], bool]]
"""A line to type (or something to do), then what to wait for: text the terminal shows, or a
condition."""


def typed_in_a_terminal(env: dict[str, str], cwd: Path, line: bytes, until: bytes) -> bytes:
    """Run ``clawbot chat`` on a pseudo-terminal, type ``line``, and return everything it
    showed (stdout and stderr both) up to ``until``; then it is stopped."""
    return typed_steps(env, cwd, [(line, until)])


def typed_steps(
    env: dict[str, str], cwd: Path, steps: list[Step], command: tuple[str, ...] = ("chat",)
) -> bytes:
    """As :func:`typed_in_a_terminal`, for several lines: each is typed once what the step
    before it waits for happened (a text is looked for after the one the step before found).
    ``command`` is what runs (``clawbot chat`` unless told)."""
    main, secondary = pty.openpty()
    process = subprocess.Popen(
        [*IN_ITS_TERMINAL, *CLAWBOT, *command],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    os.close(secondary)
    shown = b""
    seen = 0  # where the last step's text ended: the next one is looked for after it
    try:
        for line, until in steps:
            if callable(line):
                line()
            else:
                os.write(main, line)
            deadline = time.monotonic() + DEADLINE
            while not (until() if callable(until) else until in shown[seen:]):
                wait = min(0.1, max(0.0, deadline - time.monotonic()))
                ready, _, _ = select.select([main], [], [], wait)
                assert time.monotonic() < deadline, (
                    f"no {until!r}; the terminal showed {shown!r}; {_signal_state(process.pid)}"
                )
                if ready:
                    shown += os.read(main, 65536)
            if not callable(until):
                seen = shown.index(until, seen) + len(until)
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


def test_queue_subagents_and_stop_typed_while_a_turn_runs_are_answered_and_stop_stops_it_now(
    tmp_path: Path,
) -> None:
    with OpenAIStandin([{"hang": True}]).running() as standin:
        shown = typed_steps(
            environment(tmp_path / "home", standin),
            tmp_path,
            [
                (b"take your time\r", standin.hung.is_set),
                (b"/queue\r", b"Running: a turn in the main lane"),
                (b"/subagents\r", b"This conversation has no subagents."),
                (b"/stop\r", b"Stopped the running turn."),
            ],
        )

    assert b"Stopped the running turn." in shown


def test_an_approval_is_answered_at_the_one_prompt(tmp_path: Path) -> None:
    script: list[Reply] = [
        {"tool_calls": [("file_write", {"path": "a.md", "content": "hi"})]},
        "Written.",
    ]
    with OpenAIStandin(script).running() as standin:
        env = environment(tmp_path / "home", standin, CLAWBOT_AUTONOMY="supervised")
        shown = typed_steps(env, tmp_path, [(b"write a.md\r", b"o = once"), (b"o\r", b"Written.")])

    assert b"Approved once: file_write" in shown
    assert (tmp_path / "home" / "workspace" / "a.md").read_text() == "hi"


def test_a_reply_shows_in_a_terminal_while_it_is_written(tmp_path: Path) -> None:
    first = "The first line is here.\nAnd the second "
    with OpenAIStandin([{"held": [first, "line ends the reply."]}]).running() as standin:
        shown = typed_steps(
            environment(tmp_path / "home", standin),
            tmp_path,
            [
                # shown while the model holds back the rest of its answer
                (b"hi\r", b"The first line is here."),
                (standin.go_on, b"line ends the reply."),
            ],
        )

    assert standin.holding.is_set()
    assert shown.index(b"The first line is here.") < shown.index(b"line ends the reply.")
    assert standin.requests[0]["stream"] is True


def test_piped_chat_prints_whole_replies_and_asks_for_no_stream(tmp_path: Path) -> None:
    with OpenAIStandin(["One whole reply."]).running() as standin:
        done = run(["chat"], b"hi\n", environment(tmp_path / "home", standin), tmp_path)

    assert done.stdout.decode().splitlines() == ["One whole reply."]
    assert not standin.requests[0].get("stream")


def test_a_file_the_agent_sends_is_saved_as_a_copy_and_its_path_shown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    (home / "workspace" / "report.csv").write_bytes(b"month,total\nmay,12\n")
    script: list[Reply] = [
        {"tool_calls": [("send_file", {"path": "report.csv", "caption": "The **report**."})]},
        "Sent it.",
    ]
    with OpenAIStandin(script).running() as standin:
        env = environment(home, standin, CLAWBOT_AUTONOMY="full")
        shown = typed_in_a_terminal(env, tmp_path, b"send me the report\r", b"Sent it.")

    copy = home / "downloads" / "report.csv"
    assert copy.read_bytes() == b"month,total\nmay,12\n"
    assert b"The **report**." in shown
    assert b"[file] report.csv (19 bytes, a document): saved as" in shown
    assert str(copy).encode() in shown.replace(b"\r\n", b"")
