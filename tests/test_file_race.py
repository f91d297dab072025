"""No file tool leaves the workspace through a check-then-use race.

A process swaps names inside the workspace, as fast as it can, between a real folder (or
file) and a link to one outside: ``d`` (a folder on the path), ``f`` (the file itself) and
``agents`` (above an agent's own folder, which its first call makes). Meanwhile each file tool
is called hundreds of times on paths through them. A name checked and then looked up again
would, now and then, be the link the second time: the tool would read, write, edit, list or
create outside (the old code did, see issue 26). Every call here is counted against the
folder outside: nothing may be read from it, written, edited or created in it.

Each tool runs twice: with what the kernel offers (``openat2`` on Linux 5.6+) and with the
walk one name at a time that stands in where it lacks it.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clawbot.agents import beneath
from clawbot.app import Clawbot
from clawbot.messages import ToolCallBlock
from clawbot.routing.sessions import Session
from clawbot.security.reach import Reach, Root
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedCall, ScriptedModel, Step, call
from clawbot.tools.files import file_tools
from clawbot.tools.registry import ToolContext, ToolRegistry

from .spawned import spawn
from .test_approvals import command, is_request, request_id
from .test_shell_tool import SANDBOX

CALLS = 1000
"""Calls per tool and resolution (about a second on one core): the old code leaked through
2 to 5 % of them."""
INSIDE = "inside edit-me"
OUTSIDE = "top secret edit-me"
OUTSIDE_ONLY = "outside-only.txt"

SWAPPER = """
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive a killed test run
if os.getppid() == 1:
    sys.exit("the test that started this swapper is gone")
os.chdir(sys.argv[1])
exchange = libc.renameat2
AT_FDCWD, RENAME_EXCHANGE = -100, 2
names = [(name.encode(), (name + ".swap").encode()) for name in sys.argv[2:]]
for name, swap in names:
    if exchange(AT_FDCWD, name, AT_FDCWD, swap, RENAME_EXCHANGE) != 0:
        sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
print("swapping", flush=True)
while True:
    for name, swap in names:
        exchange(AT_FDCWD, name, AT_FDCWD, swap, RENAME_EXCHANGE)
"""
"""Exchanges each ``<name>`` (a folder or file inside) with ``<name>.swap`` (a link to one
outside) in one step (``renameat2(RENAME_EXCHANGE)``), over and over until it is killed: the
name is always there, once the real one, once the link."""


@dataclass
class Leaks:
    """What reached the folder outside, by kind."""

    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def count(self) -> dict[str, int]:
        return {kind: len(found) for kind, found in vars(self).items()}

    def __str__(self) -> str:
        return "; ".join(
            f"{len(found)} {kind} (first: {found[0]!r})"
            for kind, found in vars(self).items()
            if found
        )


@dataclass
class Race:
    """The workspace, the folder outside it as it was, and what the calls did."""

    workspace: Path
    outside: Path
    before: dict[str, str | None]
    leaks: Leaks = field(default_factory=Leaks)
    results: list[tuple[str, bool]] = field(default_factory=list)

    def snapshot(self) -> dict[str, str | None]:
        """Every path under the folder outside: a file's text, None for a folder."""
        found: dict[str, str | None] = {}
        for folder, folders, files in os.walk(self.outside):
            for name in folders:
                found[os.path.relpath(os.path.join(folder, name), self.outside)] = None
            for name in files:
                path = os.path.join(folder, name)
                found[os.path.relpath(path, self.outside)] = Path(path).read_text()
        return found

    def account(self, tool: str | None, content: str, is_error: bool) -> None:
        """Count what this call did outside (None: a call of any tool, an edit told from a
        write by its mark), and put the folder outside back as it was."""
        self.results.append((content, is_error))
        if not is_error and (OUTSIDE in content or OUTSIDE_ONLY in content):
            self.leaks.reads.append(content[:80])
        now = self.snapshot()
        if now == self.before:
            return
        for path, text in now.items():
            if path not in self.before:
                self.leaks.created.append(path)
            elif text != self.before[path]:
                marks = (text or "").count("!")  # one an edit
                if tool == "file_edit" or (tool is None and marks):
                    self.leaks.edits.extend([path] * max(1, marks))
                else:
                    self.leaks.writes.append(path)
        self.leaks.deleted.extend(path for path in self.before if path not in now)
        self.restore()

    def restore(self) -> None:
        shutil.rmtree(self.outside)
        for path, text in sorted(self.before.items()):
            if text is None:
                (self.outside / path).mkdir(parents=True, exist_ok=True)
            else:
                (self.outside / path).parent.mkdir(parents=True, exist_ok=True)
                (self.outside / path).write_text(text)

    def saw_the_swap(self) -> bool:
        """Whether the calls met both the folder inside and the link (so the race ran)."""
        return any(not failed for _, failed in self.results) and any(
            "leads outside the workspace" in content for content, _ in self.results
        )


def lay_out(workspace: Path, outside: Path) -> Race:
    """The workspace with ``d``, ``f`` and ``agents`` in it, each with a ``.swap`` link to
    ``outside`` beside it; ``outside`` holding the same names."""
    for root, text in ((workspace / "d", INSIDE), (outside, OUTSIDE)):
        (root / "sub").mkdir(parents=True)
        for path in ("secret.txt", "existing.txt", "sub/secret.txt"):
            (root / path).write_text(text)
    (outside / OUTSIDE_ONLY).write_text(OUTSIDE)
    (workspace / "f").write_text(INSIDE)
    (workspace / "agents").mkdir(exist_ok=True)
    os.symlink(outside, workspace / "d.swap")
    os.symlink(outside / "secret.txt", workspace / "f.swap")
    os.symlink(outside, workspace / "agents.swap")
    race = Race(workspace, outside, {})
    race.before = race.snapshot()
    return race


@pytest.fixture
async def swapping(tmp_path: Path, spawned_processes: None) -> AsyncIterator[Race]:
    """The layout, with the swapper running on it (killed at the end)."""
    race = lay_out(tmp_path / "ws", tmp_path / "outside")
    process = await spawn(
        sys.executable,
        "-c",
        SWAPPER,
        str(race.workspace),
        "d",
        "f",
        "agents",
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert await process.stdout.readline() == b"swapping\n"
    yield race
    process.kill()
    await process.wait()


@pytest.fixture(params=["kernel", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``kernel``: openat2 where this kernel has it; ``walk``: one name at a time, as where
    it has not."""
    if request.param == "walk":
        monkeypatch.setattr(beneath.KERNEL, "usable", False)
    return str(request.param)


def context(workspace: Path, reach: Reach) -> ToolContext:
    async def session_reach() -> Reach:
        return reach

    return ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="main"),
        workspace=workspace,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
        reach=session_reach,
    )


async def race_calls(
    race: Race,
    tool: str,
    arguments: Callable[[int], dict[str, Any]],
    reach: Reach | None = None,
) -> Leaks:
    """``CALLS`` calls of ``tool`` against the swapper, each accounted for."""
    registry = ToolRegistry(file_tools())
    ctx = context(race.workspace, reach or Reach.whole())
    for number in range(CALLS):
        call = ToolCallBlock(id=str(number), name=tool, arguments=arguments(number))
        result = await registry.execute(call, ctx)
        race.account(tool, result.content, result.is_error)
    return race.leaks


NO_LEAKS = {"reads": 0, "writes": 0, "edits": 0, "created": 0, "deleted": 0}


async def test_file_read_never_reads_outside_while_links_are_swapped(
    swapping: Race, resolution: str
) -> None:
    paths = ["d/secret.txt", "d/sub/secret.txt", "f"]

    leaks = await race_calls(swapping, "file_read", lambda n: {"path": paths[n % 3]})

    assert leaks.count() == NO_LEAKS, str(leaks)
    assert swapping.saw_the_swap()


async def test_list_dir_never_lists_outside_while_links_are_swapped(
    swapping: Race, resolution: str
) -> None:
    leaks = await race_calls(swapping, "list_dir", lambda n: {"path": ("d", "d/sub")[n % 2]})

    assert leaks.count() == NO_LEAKS, str(leaks)
    assert swapping.saw_the_swap()


async def test_file_write_never_writes_or_creates_outside_while_links_are_swapped(
    swapping: Race, resolution: str
) -> None:
    paths = ["d/new-{n}.txt", "d/made-{n}/deeper/new.txt", "d/existing.txt", "f"]

    leaks = await race_calls(
        swapping,
        "file_write",
        lambda n: {"path": paths[n % 4].format(n=n), "content": f"written {n}"},
    )

    assert leaks.count() == NO_LEAKS, str(leaks)
    assert swapping.saw_the_swap()


async def test_file_edit_never_edits_outside_while_links_are_swapped(
    swapping: Race, resolution: str
) -> None:
    paths = ["d/existing.txt", "d/sub/secret.txt", "f"]

    leaks = await race_calls(
        swapping,
        "file_edit",
        lambda n: {"path": paths[n % 3], "old_text": "edit-me", "new_text": "edit-me!"},
    )

    assert leaks.count() == NO_LEAKS, str(leaks)
    assert swapping.saw_the_swap()


async def test_an_agents_folder_is_never_made_outside_while_links_are_swapped(
    swapping: Race, resolution: str
) -> None:
    """An agent's first call makes ``agents/<id>/``: with ``agents`` swapped for a link."""
    reach = Reach((Root("agents/builder", write=True),), home="agents/builder")

    leaks = await race_calls(
        swapping,
        "file_write",
        lambda n: {"path": f"agents/builder/new-{n}.txt", "content": "x"},
        reach=reach,
    )

    assert leaks.count() == NO_LEAKS, str(leaks)
    assert swapping.saw_the_swap()


# the same race, through the agent loop: a child's shell swaps, its parent's tools run --------

ROUNDS, PER_ROUND = 10, 100
"""The parent's file tool calls: ``ROUNDS`` model steps of ``PER_ROUND`` calls each."""
STARTUP_LIMIT = 60.0
"""Seconds the child's command may take to start before the test fails (not a wait: a bound)."""
TASK = "SWAP-TASK: swap d and f with their links until told to stop"
CHILD_SWAPPER = """
import ctypes, os
exchange = ctypes.CDLL(None, use_errno=True).renameat2
open("ready", "w").close()
while not os.path.exists("stop"):
    for _ in range(64):
        exchange(-100, b"d", -100, b"d.swap", 2)
        exchange(-100, b"f", -100, b"f.swap", 2)
"""
"""The child's command: says it is ready through the named pipe ``ready`` (the parent's
model waits on it), then exchanges ``d`` and ``f`` with their links until ``stop`` exists."""


def parent_round(number: int) -> list[ScriptedCall]:
    """One model step of the parent: every file tool, on paths through ``d`` and ``f``,
    each spelled its own way (``./`` repeated), as the agent loop refuses a repeated call."""
    calls = []
    for index in range(number * PER_ROUND, (number + 1) * PER_ROUND):
        here = "./" * (index // 7)
        calls.append(
            [
                call("file_read", path=f"{here}d/secret.txt"),
                call("file_read", path=f"{here}f"),
                call("list_dir", path=f"{here}d"),
                call("file_write", path=f"d/new-{index}.txt", content=f"written {index}"),
                call("file_write", path=f"d/made-{index}/new.txt", content=f"written {index}"),
                call(
                    "file_edit",
                    path=f"{here}d/existing.txt",
                    old_text="edit-me",
                    new_text="edit-me!",
                ),
                call("file_edit", path=f"{here}f", old_text="edit-me", new_text="edit-me!"),
            ][index % 7]
        )
    return calls


def wait_for_the_swapper(fifo: Path) -> None:
    """Return once the child's command has opened (and closed) the write end of ``fifo``."""
    with fifo.open("rb") as ready:
        ready.read()


async def swapper_ready(fifo: Path) -> None:
    """Wait (in a thread) for the child's command to start; free the thread if it never
    does, so the failure is a timeout rather than a hang."""
    try:
        await asyncio.wait_for(asyncio.to_thread(wait_for_the_swapper, fifo), STARTUP_LIMIT)
    except TimeoutError:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        raise


async def test_a_childs_shell_swapping_links_never_leads_the_parents_tools_outside(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    """Children run beside their parent: here a child's shell (sandboxed where bubblewrap
    works, else on the host, as the operator may allow) swaps ``d`` and ``f`` for links out
    while its parent's file tools run, all through the real agent loop."""
    outcomes: list[tuple[str, bool]] = []
    steps = 0

    async def model(request: ModelRequest) -> Step:
        nonlocal steps
        first = next(m for m in request.messages if m["role"] == "user")
        if TASK in str(first["content"]):  # the child
            if request.tool_results:
                return "stopped"
            return call("shell_exec", command=f"python3 -c {shlex.quote(CHILD_SWAPPER)}")
        if request.last_user_text != "go":  # the child's report, in a turn of its own
            return "ok"
        steps += 1
        if steps == 1:
            return call("sessions_spawn", task=TASK)
        if steps == 2:
            await swapper_ready(workspace / "ready")
        else:
            results = request.tool_results[-PER_ROUND:]
            outcomes.extend((text, text.startswith("error:")) for text in results)
        if steps - 2 < ROUNDS:
            return parent_round(steps - 2)
        (workspace / "stop").touch()
        return "done"

    scripted.function = model
    settings = Settings(
        home=tmp_path / "home",
        model=scripted.model_string,
        retry_backoff=0,
        max_tool_rounds=ROUNDS + 2,
        shell_unsandboxed="allow-host-access",
        _env_file=None,  # type: ignore[call-arg]
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        workspace = bot.workspace.root
        race = lay_out(workspace, tmp_path / "outside")
        os.mkfifo(workspace / "ready")
        receipt = await bot.router.receive(channel.message("go"))
        if SANDBOX is None:  # on the host the shell is unsafe: a person approves the call
            request = await channel.sent_when(is_request)
            await command(bot, channel, f"/approve {request_id(request)} once")
        await receipt.wait()
        await bot.scheduler.wait_idle()

    for content, is_error in outcomes:
        race.account(None, content, is_error)
    assert len(outcomes) == ROUNDS * PER_ROUND
    assert race.leaks.count() == NO_LEAKS, str(race.leaks)
    assert race.saw_the_swap()
