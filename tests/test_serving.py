"""One serving process per home: a second `clawbot chat` or `clawbot run` on the same
database is refused with a message naming the running one, operator commands keep working
beside it, and the lock goes with the process (a SIGKILL leaves none behind)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawbot.cli.serving import SUFFIX

from .standins.openai_api import OpenAIStandin
from .test_cli import CLAWBOT, environment, run

TELEGRAM_TOKEN = "123456789:AAHstandinTOKENxxxxxxxxxxxxxxxxxxxx_"


@pytest.fixture
def serving(standin: OpenAIStandin, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A `clawbot chat` that is serving: it holds the home's lock and waits for input."""
    env = environment(tmp_path / "home", standin)
    process = subprocess.Popen(
        [*CLAWBOT, "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    lock = tmp_path / "home" / f"clawbot.db{SUFFIX}"
    deadline = time.monotonic() + 60
    while f"pid={process.pid}" not in _text(lock):
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        assert time.monotonic() < deadline, "the first chat never took the lock"
        time.sleep(0.02)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def test_a_second_chat_on_the_same_home_is_refused_naming_the_running_one(
    serving: subprocess.Popen[bytes], standin: OpenAIStandin, tmp_path: Path
) -> None:
    second = run(["chat"], b"hello\n", environment(tmp_path / "home", standin), tmp_path)

    assert second.returncode == 1
    err = second.stderr.decode().strip()
    assert err.startswith(f"clawbot: `clawbot chat` (pid {serving.pid}) is already serving")
    assert "--home or CLAWBOT_HOME" in err
    assert len(err.splitlines()) == 1
    assert second.stdout == b""
    assert standin.requests == []  # the refused process never reached the model


def test_run_beside_a_serving_chat_is_refused_before_connecting(
    serving: subprocess.Popen[bytes], standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(
        tmp_path / "home",
        standin,
        CLAWBOT_TELEGRAM_TOKEN=TELEGRAM_TOKEN,
        CLAWBOT_TELEGRAM_API_BASE="http://127.0.0.1:9/bot",
    )

    second = run(["run"], b"", env, tmp_path)

    assert second.returncode == 1
    assert f"`clawbot chat` (pid {serving.pid}) is already serving" in second.stderr.decode()
    assert "Traceback" not in second.stderr.decode()


def test_operator_commands_work_beside_a_serving_bot(
    serving: subprocess.Popen[bytes], standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(tmp_path / "home", standin)

    pairing = run(["pairing", "list"], b"", env, tmp_path)
    agents = run(["agents", "list"], b"", env, tmp_path)
    doctor = run(["doctor"], b"", env, tmp_path)
    tree = run(["sessions", "tree"], b"", env, tmp_path)

    assert (pairing.returncode, pairing.stdout) == (0, b"No pairing codes are waiting.\n")
    assert (tree.returncode, tree.stdout) == (0, b"No session has subagents.\n")
    assert agents.returncode == 0 and b"main" in agents.stdout
    assert b"already serving" not in doctor.stdout + doctor.stderr
    assert b"database" in doctor.stdout


def test_the_serving_chat_still_answers_after_a_second_one_was_refused(
    serving: subprocess.Popen[bytes], standin: OpenAIStandin, tmp_path: Path
) -> None:
    run(["chat"], b"from the second\n", environment(tmp_path / "home", standin), tmp_path)

    out, _ = serving.communicate(b"from the first\n", timeout=60)

    assert serving.returncode == 0
    assert out.decode() == "echo: from the first\n"


def test_a_killed_chat_leaves_no_lock_behind(
    serving: subprocess.Popen[bytes], standin: OpenAIStandin, tmp_path: Path
) -> None:
    serving.send_signal(signal.SIGKILL)
    serving.wait(30)

    after = run(["chat"], b"hello\n", environment(tmp_path / "home", standin), tmp_path)

    assert after.returncode == 0, after.stderr.decode()
    assert after.stdout.decode() == "echo: hello\n"
