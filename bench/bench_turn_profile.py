"""Where a turn's framework time goes: a profile of turns through the whole pipeline.

    python bench/bench_turn_profile.py                   # 300 sessions x 3 turns, cProfile
    python bench/bench_turn_profile.py --count-lines     # lines run per function: counted
    python bench/bench_turn_profile.py --stub-litellm    # the model call returns at once
    python bench/bench_turn_profile.py --tool file_read  # each turn makes one tool call
    python bench/bench_turn_profile.py --plain           # no profiler: for time, callgrind

The turns are bench_pipeline.py's (in-memory channel -> router -> store -> runtime -> the
scripted model through the real ``litellm.acompletion`` -> outbox), after one warm-up turn
per session. Prints, per turn, clawbot's own functions by cumulative time with their calls
and own time (cProfile, which slows small functions most), or with ``--count-lines`` the
Python lines each function ran: a count, the same however busy the machine is, to compare
two trees. ``--stub-litellm`` answers every model call with one canned response, so the
profile holds the framework alone. ``--save FILE`` keeps the cProfile data for pstats.
``--plain`` runs the turns without either, for an outside tool: instructions per turn are
what ``valgrind --tool=callgrind`` counts for ``--turns 3`` less ``--turns 0``, divided by
the extra turns. Under such a tool a turn takes some 50 ms, so timers meant to fire once
in hundreds of turns (the journal's 0.2 s write-behind, the reply marks' flush, the
workspace's once-a-second recheck) fire every few turns and change the work counted:
``--fixed-timers`` pushes them out, so the turns do what they do at full speed (a hundred
journalled turns to a commit).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clawbot.app import Clawbot
from clawbot.providers import litellm_module
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ScriptedModel, call

Tracer = Callable[[FrameType, str, Any], Any]


class LineCounter:
    """Counts, per function, the calls and the lines run (``sys.settrace``)."""

    def __init__(self) -> None:
        self.lines: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def trace(self, frame: FrameType, event: str, arg: Any) -> Tracer:
        key = name_of(frame.f_code.co_filename, frame.f_code.co_name)
        self.calls[key] += 1
        lines = self.lines

        def local(frame: FrameType, event: str, arg: Any) -> Tracer:
            if event == "line":
                lines[key] += 1
            return local

        return local


def is_framework(key: str) -> bool:
    """clawbot's own code, the scripted model (the stand-in for a provider) left out."""
    return key.startswith("clawbot/") and not key.startswith("clawbot/testing/__init__.py")


def name_of(filename: str, function: str) -> str:
    path = Path(filename)
    if path.is_relative_to(ROOT):
        return f"{path.relative_to(ROOT)}:{function}"
    return f"{path.name}:{function}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--turns", type=int, default=3, help="turns per session, profiled")
    parser.add_argument("--count-lines", action="store_true")
    parser.add_argument("--plain", action="store_true", help="run the turns, profile nothing")
    parser.add_argument("--stub-litellm", action="store_true")
    parser.add_argument("--tool", choices=["file_read", "list_dir"], default=None)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--fixed-timers", action="store_true", help="for a slowed-down run")
    args = parser.parse_args()
    if args.fixed_timers:
        push_out_timers()

    model = ScriptedModel(name="bench", default_text="Fine, thanks.", record=False)
    with model.installed():
        litellm: Any = litellm_module()
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        original = litellm.acompletion
        if args.stub_litellm:
            canned = await original(
                model=model.model_string, messages=[{"role": "user", "content": "hi"}]
            )

            async def answer_at_once(*call_args: object, **kwargs: object) -> object:
                return canned

            litellm.acompletion = answer_at_once
        try:
            with tempfile.TemporaryDirectory() as home:
                settings = Settings(
                    home=Path(home),
                    model=model.model_string,
                    max_history_messages=60,
                    rate_limit_per_minute=0,  # a load test, not a person typing
                    _env_file=None,
                )  # type: ignore[call-arg]
                async with await Clawbot.open(settings) as bot:
                    (bot.workspace.root / "notes.txt").write_text("a note\n")
                    channel = MemoryChannel()
                    bot.connect(channel)
                    handle = bot.router.handle

                    async def one_round(text: str) -> None:
                        for session in range(args.sessions):
                            if args.tool:
                                where = "notes.txt" if args.tool == "file_read" else "."
                                model.add(call(args.tool, path=where), "Done.")
                            await handle(channel.message(text, chat_id=f"chat{session}"))
                        await GLOBAL_LOGGING_WORKER.flush()
                        channel.sent.clear()

                    await one_round("warm up")
                    counter = LineCounter()
                    profile = cProfile.Profile()
                    if args.count_lines:
                        sys.settrace(counter.trace)
                    elif not args.plain:
                        profile.enable()
                    for turn in range(args.turns):
                        await one_round(f"message {turn}")
                    sys.settrace(None)
                    profile.disable()
        finally:
            litellm.acompletion = original

    turns = args.sessions * args.turns
    what = "litellm stubbed" if args.stub_litellm else "scripted model through litellm"
    tool = f", one {args.tool} call each" if args.tool else ""
    print(f"turn profile: {args.sessions} sessions x {args.turns} turns ({what}{tool})")
    if args.plain:
        return
    if args.count_lines:
        print_lines(counter, turns, args.top)
    else:
        print_profile(profile, turns, args.top)
        if args.save:
            profile.dump_stats(args.save)


def push_out_timers() -> None:
    """Timers that fire once in hundreds of turns at full speed, set to an hour."""
    import clawbot.agents.skills
    import clawbot.agents.workspace
    import clawbot.scheduling.delivery
    import clawbot.store.intake

    clawbot.store.intake.WRITE_BEHIND_SECONDS = 3600.0
    clawbot.scheduling.delivery.REPLIED_FLUSH_SECONDS = 3600.0
    clawbot.agents.workspace.RECHECK_SECONDS = 3600.0
    vars(clawbot.agents.skills)["RECHECK_SECONDS"] = 3600.0  # its own copy of the name


def print_lines(counter: LineCounter, turns: int, top: int) -> None:
    total_lines = sum(counter.lines.values()) / turns
    total_calls = sum(counter.calls.values()) / turns
    ours = sum(n for key, n in counter.lines.items() if is_framework(key)) / turns
    print(f"  Python lines run per turn {total_lines:8.1f}, function calls {total_calls:.1f}")
    print(f"  of the lines, in clawbot/ (the scripted model's aside) {ours:8.1f}")
    print(f"  {'lines/turn':>10} {'calls/turn':>10}  function")
    for key, lines in counter.lines.most_common(top):
        print(f"  {lines / turns:10.1f} {counter.calls[key] / turns:10.1f}  {key}")


def print_profile(profile: cProfile.Profile, turns: int, top: int) -> None:
    stats: Any = pstats.Stats(profile)
    rows = []
    for (filename, _, function), (_, calls, own, cumulative, _) in stats.stats.items():
        key = name_of(filename, function)
        if is_framework(key):
            rows.append((cumulative, own, calls, key))
    rows.sort(reverse=True)
    total = sum(own for _, own, _, _ in rows)
    print(f"  clawbot's own functions: {total / turns * 1e6:.0f} µs of own time per turn")
    print(f"  {'cum µs':>8} {'own µs':>8} {'calls':>6}  function (per turn, under cProfile;")
    print("  a coroutine's calls count each time it resumes)")
    for cumulative, own, calls, key in rows[:top]:
        print(
            f"  {cumulative / turns * 1e6:8.1f} {own / turns * 1e6:8.1f} {calls / turns:6.1f}  {key}"
        )


if __name__ == "__main__":
    asyncio.run(main())
