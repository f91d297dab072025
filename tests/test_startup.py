"""Start-up: ``clawbot run`` and ``clawbot chat`` start importing litellm before the
database opens and the adapters start, so those run beside it; the quick commands never
import it; a model call made while the import runs waits for it without stopping the event
loop; the collector is off while the start's objects pile up.

Each case runs in a fresh interpreter (this one imported litellm long ago), with a hook
that notes what has happened when the watched step comes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Notes, when the database is about to open, whether the preload thread runs, and leaves
# at once: nothing after that point matters here.
DATABASE_SPY = """
import os, sys, threading
import clawbot.store

async def spy(settings, embedder=None):
    preloading = any(t.name == "litellm-import" for t in threading.enumerate())
    print("preload started before the database opens:", preloading, flush=True)
    os._exit(0)

clawbot.store.open_store = spy  # what clawbot.app imports, once the command imports it
from clawbot.cli.main import main
sys.argv = ["clawbot", *sys.argv[1:]]
main()
"""

# Runs a command to its end and says whether litellm was imported or its import started.
IMPORT_SPY = """
import sys, threading
from clawbot.cli.main import main
sys.argv = ["clawbot", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
started = any(t.name == "litellm-import" for t in threading.enumerate())
print("litellm:", "litellm" in sys.modules or started, flush=True)
"""

# A preload whose last import (the openai SDK's resources) is held until the event loop
# has run 50 times while a model client waits for it.
LOAD_SPY = """
import asyncio, sys, threading

release = threading.Event()

class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == "openai.resources" and threading.current_thread().name == "litellm-import":
            release.wait()
        return None

sys.meta_path.insert(0, Hold())
from clawbot.providers import preload_in_background
from clawbot.runtime.llm import ModelClient

async def main():
    client = ModelClient()
    ticks = 0

    async def tick():
        nonlocal ticks
        while not client.loaded():
            ticks += 1
            if ticks == 50:
                release.set()
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    print("loaded before:", client.loaded())
    await client.load()
    preloading = any(t.name == "litellm-import" for t in threading.enumerate())
    print("loaded after:", client.loaded(), "ticks:", ticks >= 50, "preload running:", preloading)
    ticker.cancel()

preload_in_background()
asyncio.run(main())
"""


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAWBOT_", "OPENAI_"))}
    env.update(
        CLAWBOT_HOME=str(tmp_path / "home"),
        OPENAI_API_KEY="sk-test-not-a-real-key-000000",
        CLAWBOT_TELEGRAM_TOKEN="123456789:AAH" + "standinTOKEN" * 3,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    return env


def spy(script: str, *args: str, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=environment(tmp_path),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_serving_command_starts_importing_litellm_before_the_database_opens(
    command: str, tmp_path: Path
) -> None:
    out = spy(DATABASE_SPY, command, tmp_path=tmp_path)

    assert out.strip() == "preload started before the database opens: True"


@pytest.mark.parametrize(
    "args", [["--help"], ["--version"], ["chat", "--help"], ["run", "--help"]], ids=" ".join
)
def test_a_quick_command_never_imports_litellm(args: list[str], tmp_path: Path) -> None:
    out = spy(IMPORT_SPY, *args, tmp_path=tmp_path)

    assert out.strip().endswith("litellm: False")


def test_a_model_client_waits_for_the_whole_preload_while_the_event_loop_runs(
    tmp_path: Path,
) -> None:
    """Not loaded while the preload still imports (litellm in, the openai SDK's modules its
    first call needs not yet): a call then would block the event loop on that import."""
    out = spy(LOAD_SPY, tmp_path=tmp_path)

    assert out.splitlines() == [
        "loaded before: False",
        "loaded after: True ticks: True preload running: False",
    ]


def test_the_collector_is_off_while_the_preload_imports_and_on_again_after_it(
    tmp_path: Path,
) -> None:
    """Collecting while the start's objects pile up walked them again and again; once the
    preload ends they are frozen and the collector runs as usual."""
    script = (
        "import gc, threading\n"
        "from clawbot.providers import preload_in_background, wait_for_preload\n"
        "preload_in_background()\n"
        "print('during:', gc.isenabled())\n"
        "wait_for_preload()\n"
        "print('after:', gc.isenabled(), gc.get_freeze_count() > 100_000)\n"
    )

    out = spy(script, tmp_path=tmp_path)

    assert out.splitlines() == ["during: False", "after: True True"]


def test_the_bot_starts_without_importing_the_html_parser(tmp_path: Path) -> None:
    """Beautiful Soup (with soupsieve, about 0.1 s) is imported at web_fetch's first page."""
    out = spy("import sys, clawbot.app; print('bs4' in sys.modules)", tmp_path=tmp_path)

    assert out.strip() == "False"


def test_the_bot_starts_without_importing_the_mcp_sdk_unless_a_server_is_configured(
    tmp_path: Path,
) -> None:
    """The MCP SDK (about a second to import) is imported when settings list a server."""
    out = spy("import sys, clawbot.app; print('mcp' in sys.modules)", tmp_path=tmp_path)

    assert out.strip() == "False"
