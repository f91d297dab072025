"""The conformance kit works for a channel outside clawbot's own: an in-memory "echo"
channel (tests/echo_channel.py) passes the shipped suite by subclassing it, here and from a
folder of its own with no clawbot conftest, as a third party's distribution runs it
(docs/channels.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from clawbot.channels.harness import PlatformHarness
from clawbot.testing.conformance import ChannelConformance, Platform
from tests.echo_channel import ROOM, EchoHarness

ECHO = Platform(
    name="echo",
    harness=EchoHarness,
    group_id=ROOM,
    thread_id="t-7",
    message_id="in-4242",
    has_typing=True,
    code_open="```",
    code_close="```",
    markup=lambda record: record.text,
)

_conforms: type[PlatformHarness] = EchoHarness


class TestEcho(ChannelConformance):
    platform = ECHO


THIRD_PARTY_TEST = """
from clawbot.testing.conformance import ChannelConformance, Platform
from echo_channel import ROOM, EchoHarness


class TestEchoChannel(ChannelConformance):
    platform = Platform(
        name="echo", harness=EchoHarness, group_id=ROOM, thread_id="t-7",
        message_id="in-4242", has_typing=True, code_open="```", code_close="```",
        markup=lambda record: record.text,
    )
"""


def test_a_distribution_of_its_own_runs_the_suite(tmp_path: Path) -> None:
    """No clawbot checkout: the channel's module, its test file and pytest-asyncio in strict
    mode, run with pytest from the distribution's folder."""
    shutil.copy(Path(__file__).with_name("echo_channel.py"), tmp_path / "echo_channel.py")
    (tmp_path / "test_echo_conformance.py").write_text(THIRD_PARTY_TEST)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nasyncio_mode = "strict"\n'
        'asyncio_default_fixture_loop_scope = "function"\n'
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = ran.stdout.strip().splitlines()[-1] if ran.stdout.strip() else ""
    tests = sum(name.startswith("test_") for name in dir(ChannelConformance))
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert summary.startswith(f"{tests} passed"), summary
