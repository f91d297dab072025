"""What each part of a turn costs next to litellm, measured by leaving it out.

    python bench/bench_parts.py no-store-writes      # 25 rounds of 200 turns per bot
    python bench/bench_parts.py same --rounds 31     # calibration: two identical bots

Two bots run in one process: one as shipped, one with a part left out (or changed). They take
rounds of turns in alternation (ABBA order), and each round's requests are replayed straight
into ``litellm.acompletion`` right after it, as in ``bench_pipeline.py``. On a shared VM whose
speed drifts within a minute, only such interleaving tells a part's cost from the drift; the
``same`` variant shows how far two identical bots differ. A variant is a diagnostic, never a
configuration: leaving out the store's writes breaks every promise the store makes.

Prints per bot the end-to-end time per turn, the bare time per call, their ratio, and the
event-loop thread's user and kernel CPU per turn (litellm's own share included on both).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import Request, bare_litellm_seconds, flush_litellm_logging

from clawbot.app import Clawbot
from clawbot.providers import litellm_module
from clawbot.runtime.plugins import TurnPlugins
from clawbot.settings import Settings
from clawbot.store import SqliteStore
from clawbot.testing import MemoryChannel, ScriptedModel


async def _skip_submit(*args: Any, **kwargs: Any) -> bool:
    return True  # "stored, and not a redelivery"


async def _skip_finish(*args: Any, **kwargs: Any) -> None:
    return None


def _no_checkpoints() -> None:
    return None


def _sqlite(bot: Clawbot) -> SqliteStore:
    """The bot's store as the SQLite one: the variants reach below the Store protocol."""
    assert isinstance(bot.store, SqliteStore)
    return bot.store


async def _pragma(bot: Clawbot, pragma: str) -> None:
    # A pragma outside any transaction; the store has no public call for one.
    await _sqlite(bot).database.fetchall(pragma)


async def _drop_indexes(bot: Clawbot) -> None:
    def drop(db: sqlite3.Connection) -> None:
        db.execute("DROP INDEX messages_by_session")
        db.execute("DROP INDEX turn_jobs_pending")

    await _sqlite(bot).transaction(drop)


async def _leave_out_store_writes(bot: Clawbot) -> None:
    # Instance attributes: the shipped bot next to this one is untouched.
    jobs = _sqlite(bot).jobs
    jobs.submit = _skip_submit  # type: ignore[method-assign]
    jobs.finish = _skip_finish  # type: ignore[method-assign]


async def _leave_out_journal(bot: Clawbot) -> None:
    _sqlite(bot).pending.journaling = False  # each message takes a transaction of its own again


async def _leave_out_checkpoints(bot: Clawbot) -> None:
    _sqlite(bot).database._committed = _no_checkpoints  # type: ignore[method-assign]


async def _leave_out_media(bot: Clawbot) -> None:
    kept = [plugin for plugin in bot.runtime.plugins.all if plugin.name != "media"]
    bot.runtime.plugins = TurnPlugins(kept)


async def _leave_out_usage_ledger(bot: Clawbot) -> None:
    bot.runtime.client.meter = None  # no usage row written, no budget asked


async def _nothing(bot: Clawbot) -> None:
    return None


@dataclass(frozen=True)
class Variant:
    what: str
    after_open: Callable[[Clawbot], Awaitable[None]] = _nothing
    page_size: int | None = None  # set on the new database file before the bot opens it


VARIANTS: dict[str, Variant] = {
    "same": Variant("an identical bot (calibration)"),
    "no-store-writes": Variant(
        "the store's writes of a turn skipped (message and answer)", _leave_out_store_writes
    ),
    "no-intake-journal": Variant(
        "no intake journal: the message and the answer each commit, as before", _leave_out_journal
    ),
    "no-checkpoints": Variant("no background WAL checkpoints", _leave_out_checkpoints),
    "no-usage-ledger": Variant(
        "no usage ledger: no row per model call, no budgets", _leave_out_usage_ledger
    ),
    "no-media": Variant("without the media plug-in (files people send)", _leave_out_media),
    "no-indexes": Variant(
        "without the per-session message index and the pending-jobs index", _drop_indexes
    ),
    "page-1k": Variant("a database of 1 KB pages", page_size=1024),
    "no-foreign-keys": Variant(
        "foreign keys not enforced", lambda bot: _pragma(bot, "PRAGMA foreign_keys=OFF")
    ),
    "exclusive-lock": Variant(
        "exclusive locking mode (no lock calls per transaction)",
        lambda bot: _pragma(bot, "PRAGMA locking_mode=EXCLUSIVE"),
    ),
}


@dataclass
class Side:
    name: str
    bot: Clawbot
    channel: MemoryChannel
    e2e: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    user: list[float] = field(default_factory=list)
    system: list[float] = field(default_factory=list)


async def open_side(name: str, variant: Variant, root: Path, model: ScriptedModel) -> Side:
    home = root / name
    settings = Settings(
        home=home,
        model=model.model_string,
        max_history_messages=60,
        rate_limit_per_minute=0,  # a load test, not a person typing
        _env_file=None,
    )  # type: ignore[call-arg]
    if variant.page_size is not None:
        home.mkdir(parents=True)
        raw = sqlite3.connect(settings.db_path)
        raw.execute(f"PRAGMA page_size={variant.page_size}")
        raw.execute("PRAGMA journal_mode=WAL")  # writes the header: the page size holds
        raw.close()
    bot = await Clawbot.open(settings)
    await variant.after_open(bot)
    channel = MemoryChannel()
    bot.connect(channel)
    for warm in range(20):
        await bot.router.handle(channel.message(f"warm {warm}", chat_id="warmup"))
    return Side(name, bot, channel)


async def one_round(
    side: Side, round_no: int, sessions: int, requests: list[Request], acompletion: Any
) -> None:
    """``sessions`` turns (one per session), then their requests replayed into litellm."""
    handle = side.bot.router.handle
    requests.clear()
    await flush_litellm_logging()
    before = resource.getrusage(resource.RUSAGE_THREAD)
    started = time.perf_counter()
    for session in range(sessions):
        await handle(
            side.channel.message(f"message {round_no} in {session}", chat_id=f"chat{session}")
        )
    await flush_litellm_logging()
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_THREAD)
    side.channel.sent.clear()
    bare = await bare_litellm_seconds(acompletion, list(requests))
    if round_no > 0:  # the first round creates the sessions: not compared
        side.e2e.append(elapsed / sessions)
        side.bare.append(bare / sessions)
        side.user.append((after.ru_utime - before.ru_utime) / sessions)
        side.system.append((after.ru_stime - before.ru_stime) / sessions)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=sorted(VARIANTS))
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--sessions", type=int, default=200)
    args = parser.parse_args()
    variant = VARIANTS[args.variant]

    model = ScriptedModel(name="bench", default_text="Fine, thanks.", record=False)
    with model.installed():
        litellm: Any = litellm_module()
        original = litellm.acompletion
        requests: list[Request] = []

        async def recorded(*call_args: object, **kwargs: Any) -> object:
            requests.append(Request(kwargs["model"], kwargs["messages"], kwargs.get("tools")))
            return await original(*call_args, **kwargs)

        litellm.acompletion = recorded
        try:
            with tempfile.TemporaryDirectory() as root:
                shipped = await open_side("shipped", VARIANTS["same"], Path(root), model)
                changed = await open_side(args.variant, variant, Path(root), model)
                try:
                    for round_no in range(args.rounds):
                        order = (shipped, changed) if round_no % 2 == 0 else (changed, shipped)
                        for side in order:
                            await one_round(side, round_no, args.sessions, requests, original)
                finally:
                    await shipped.bot.close()
                    await changed.bot.close()
        finally:
            litellm.acompletion = original

    compared = args.rounds - 1
    print(
        f"parts: shipped bot against '{args.variant}' ({variant.what}); {compared} rounds of"
        f" {args.sessions} turns each (Python {sys.version.split()[0]}, {os.cpu_count()} cores)"
    )
    for side in (shipped, changed):
        e2e, bare = statistics.mean(side.e2e), statistics.mean(side.bare)
        print(
            f"  {side.name:16s} turn {e2e * 1e6:7.0f} µs  bare call {bare * 1e6:7.0f} µs"
            f"  ratio {bare / e2e:5.3f}  loop thread CPU per turn: user"
            f" {statistics.mean(side.user) * 1e6:5.0f} µs, kernel"
            f" {statistics.mean(side.system) * 1e6:4.0f} µs"
        )
    pairs = [b / a for a, b in zip(shipped.e2e, changed.e2e, strict=True)]
    print(
        f"  turn time, '{args.variant}' / shipped, round by round: median"
        f" {statistics.median(pairs):.3f} ({min(pairs):.2f} to {max(pairs):.2f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
