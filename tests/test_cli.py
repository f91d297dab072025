"""`clawbot chat` as a user runs it: a subprocess with piped stdin against a local
OpenAI-compatible stand-in (the real litellm OpenAI path over HTTP)."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from .standins.openai_api import OpenAIStandin

CLAWBOT = [sys.executable, "-m", "clawbot"]


def environment(home: Path, standin: OpenAIStandin | None = None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLAWBOT_", "OPENAI_", "ANTHROPIC_"))
    }
    # Full autonomy, as for the in-process tests (conftest); approvals have tests of their own.
    env.update(CLAWBOT_HOME=str(home), CLAWBOT_RETRY_BACKOFF="0", CLAWBOT_AUTONOMY="full")
    if standin is not None:
        env.update(OPENAI_API_BASE=standin.base_url, OPENAI_API_KEY="sk-test-not-a-real-key-000000")
    env.update(extra)
    return env


def run(
    args: list[str], stdin: bytes, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        CLAWBOT + args, input=stdin, env=env, cwd=cwd, capture_output=True, timeout=120
    )


def chat_killed_when_the_model_hangs(
    standin: OpenAIStandin, env: dict[str, str], cwd: Path, lines: bytes, waiting_for: str
) -> str:
    """Start ``clawbot chat``, type ``lines``, SIGKILL it once a model call hangs (the
    stand-in's ``{"hang": True}`` reply); what it printed before the kill."""
    process = subprocess.Popen(
        [*CLAWBOT, "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines)
    process.stdin.flush()
    try:
        assert standin.hung.wait(60), f"{waiting_for} never reached the model"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    printed = process.stdout.read().decode()
    process.stdin.close()
    process.stdout.close()
    assert process.stderr is not None
    process.stderr.close()
    return printed


def test_piped_chat_answers_each_line_on_stdout_with_logs_on_stderr(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    standin.script = [
        {"tool_calls": [("file_write", {"path": "todo.md", "content": "milk"})]},
        "Saved.",
    ]
    stdin = b"remember milk\n\n\xff\xfe broken\n" + b"x" * 1_048_576 + b"\n/help\nstill there?\n"

    result = run(["chat"], stdin, environment(tmp_path / "home", standin), tmp_path)

    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode().splitlines()
    assert out[0] == "Saved."
    assert out[1] == "Your message was empty. Type something for the agent, or /help."
    assert out[2].startswith("Your message is too long (1,048,576 characters; the limit is 32,000)")
    assert out[3] == "Commands:"
    assert out[-1] == "echo: still there?"
    err = result.stderr.decode()
    assert "line 3 is not valid UTF-8" in err
    assert "Traceback" not in err
    assert "[main] INFO clawbot.runtime: tool file_write" in err
    assert (tmp_path / "home" / "workspace" / "todo.md").read_text() == "milk"
    assert len(standin.requests) == 3


def read_lines(stream: IO[bytes], count: int, deadline: float = 60.0) -> list[str]:
    """The next ``count`` lines ``stream`` gives within ``deadline`` seconds (a test fails on
    fewer, where reading on would wait forever)."""
    fd, shown, until = stream.fileno(), b"", time.monotonic() + deadline
    while shown.count(b"\n") < count:
        ready, _, _ = select.select([fd], [], [], max(0.0, until - time.monotonic()))
        assert ready, f"only {shown!r} within {deadline:g} s"
        chunk = os.read(fd, 65536)
        assert chunk, f"the output ended after {shown!r}"
        shown += chunk
    return shown.decode().splitlines()[:count]


def test_piped_queue_subagents_and_stop_are_answered_while_a_turn_runs_and_stop_stops_it(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    standin.script = [{"hang": True}]
    process = subprocess.Popen(
        [*CLAWBOT, "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment(tmp_path / "home", standin),
        cwd=tmp_path,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"take your time\n")
        process.stdin.flush()
        assert standin.hung.wait(60), "the message never reached the model"

        process.stdin.write(b"/queue\n/subagents\n/stop\n")
        process.stdin.flush()
        answers = read_lines(process.stdout, 3)
        process.stdin.close()
        code = process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()

    assert answers[0].startswith("Running: a turn in the main lane for ")
    assert answers[1] == "This conversation has no subagents."
    assert answers[2] == "Stopped the running turn."
    assert code == 0


def test_the_conversation_continues_after_the_process_restarts(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(tmp_path / "home", standin)
    run(["chat"], b"my name is Ann\n", env, tmp_path)

    result = run(["chat"], b"what is my name?\n", env, tmp_path)

    assert result.returncode == 0
    users = [m["content"] for m in standin.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["my name is Ann", "what is my name?"]


def test_a_missing_provider_key_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    result = run(
        ["chat", "--model", "anthropic/claude-sonnet-4-5"],
        b"hi\n",
        environment(tmp_path / "home"),
        tmp_path,
    )

    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode().strip().splitlines() == [
        "clawbot: no API key for model 'anthropic/claude-sonnet-4-5'"
        " — set ANTHROPIC_API_KEY in the environment or .env"
    ]


def test_an_invalid_setting_is_named_with_exit_code_2(tmp_path: Path) -> None:
    env = environment(tmp_path / "home", CLAWBOT_MAX_TOOL_ROUNDS="many", OPENAI_API_KEY="sk-x")

    result = run(["chat"], b"hi\n", env, tmp_path)

    assert result.returncode == 2
    assert "CLAWBOT_MAX_TOOL_ROUNDS" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


def test_a_corrupt_database_is_reported_and_left_untouched(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    garbage = b"this is not a database" * 100
    (home / "clawbot.db").write_bytes(garbage)

    result = run(["chat"], b"hi\n", environment(home, standin), tmp_path)

    assert result.returncode == 1
    err = result.stderr.decode()
    assert "is damaged or not a clawbot database" in err
    assert "move the file aside" in err
    assert "Traceback" not in err
    assert (home / "clawbot.db").read_bytes() == garbage


def test_a_workspace_that_does_not_exist_is_reported(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(tmp_path / "home", standin, CLAWBOT_WORKSPACE=str(tmp_path / "missing"))

    result = run(["chat"], b"hi\n", env, tmp_path)

    assert result.returncode == 1
    assert f"the workspace folder {tmp_path / 'missing'} does not exist" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


def test_first_run_seeds_the_home_and_never_overwrites_edits(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    run(["chat"], b"/status\n", environment(home, standin), tmp_path)
    soul = home / "workspace" / "SOUL.md"
    assert soul.read_text() == (Path(__file__).parent.parent / "workspace" / "SOUL.md").read_text()
    soul.write_text("my own soul")

    run(["chat"], b"hi\n", environment(home, standin), tmp_path)

    assert soul.read_text() == "my own soul"
    assert "my own soul" in standin.requests[-1]["messages"][0]["content"]


def test_help_lists_the_commands(tmp_path: Path) -> None:
    result = subprocess.run([*CLAWBOT, "--help"], capture_output=True, timeout=30, cwd=tmp_path)

    assert result.returncode == 0
    assert b"chat" in result.stdout


def test_chat_whose_output_is_closed_stops_reading_input_and_exits_quietly(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    """Run with stdout buffered, as from a user's shell: a reply that could not be written is
    then still in Python's buffer, and the flush at exit must not fail on it too (with
    PYTHONUNBUFFERED, which a test runner may set, nothing is left for that flush)."""
    lines = b"".join(f"line {n}\n".encode() for n in range(1, 21))
    env = environment(tmp_path / "home", standin)
    env.pop("PYTHONUNBUFFERED", None)
    process = subprocess.Popen(
        [*CLAWBOT, "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert process.stdin and process.stdout and process.stderr
    process.stdin.write(lines)
    process.stdin.close()
    first = process.stdout.readline()
    process.stdout.close()  # as `| head -1` does after its line
    err = process.stderr.read()
    process.wait(120)

    assert first == b"echo: line 1\n"
    assert process.returncode == 0
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()
    assert len(standin.requests) < 5  # not one model call per remaining line


def test_a_model_that_refuses_the_connection_is_reported_as_unreachable(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port on which nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = environment(
        tmp_path / "home",
        OPENAI_API_BASE=f"http://127.0.0.1:{port}/v1",
        OPENAI_API_KEY="sk-test-not-a-real-key-000000",
        CLAWBOT_PROVIDER_RETRIES="0",
    )

    result = run(["chat"], b"hello\n", env, tmp_path)

    assert result.returncode == 0
    reply = result.stdout.decode()
    assert "could not be reached (the connection failed" in reply
    assert "server error" not in reply


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """Make a database file read-only, for root too (an immutable file: root ignores modes)."""
    made: list[Path] = []

    def make(path: Path) -> None:
        made.append(path)
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i", str(path)], check=True)
        else:
            path.chmod(0o444)
            path.parent.chmod(0o555)

    yield make
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.parent.chmod(0o755)
            path.chmod(0o644)


def assert_refused_as_read_only(result: subprocess.CompletedProcess[bytes]) -> None:
    """Exit 1 with one line on stderr naming the read-only database, nothing on stdout."""
    assert result.returncode == 1
    err = result.stderr.decode().strip()
    assert err.startswith("clawbot: the database") and "is read-only" in err, err
    assert len(err.splitlines()) == 1
    assert result.stdout == b""


def test_a_read_only_database_is_refused_at_start_every_time_before_the_model(
    standin: OpenAIStandin, tmp_path: Path, read_only: Callable[[Path], None]
) -> None:
    env = environment(tmp_path / "home", standin)
    assert run(["chat"], b"hello\n", env, tmp_path).returncode == 0
    read_only(tmp_path / "home" / "clawbot.db")

    runs = [run(["chat"], b"are you there?\n", env, tmp_path) for _ in range(2)]

    for result in runs:
        assert_refused_as_read_only(result)
    assert len(standin.requests) == 1  # only the first chat's message reached the model


def test_a_read_only_database_is_refused_at_the_start_of_run_before_connecting(
    standin: OpenAIStandin, tmp_path: Path, read_only: Callable[[Path], None]
) -> None:
    env = environment(tmp_path / "home", standin)
    assert run(["chat"], b"hello\n", env, tmp_path).returncode == 0
    read_only(tmp_path / "home" / "clawbot.db")
    env.update(  # nothing listens on port 9: a bot that got as far as connecting would fail
        CLAWBOT_TELEGRAM_TOKEN="123456789:AAHstandinTOKENxxxxxxxxxxxxxxxxxxxx_",
        CLAWBOT_TELEGRAM_API_BASE="http://127.0.0.1:9/bot",
    )

    result = run(["run"], b"", env, tmp_path)

    assert_refused_as_read_only(result)
    assert len(standin.requests) == 1  # only the first chat's message reached the model
