"""The whole pipeline on PostgreSQL beside SQLite, in one run: the same sessions x turns
through ``bench_pipeline.pipeline`` with a zero-latency scripted model, the store on the
home's SQLite file and then on a PostgreSQL server started in a temporary folder
(tests/postgres_server.py). One process; several processes on one database come later.

    .venv/bin/python bench/bench_postgres_pipeline.py                # 200 sessions x 5 turns
    .venv/bin/python bench/bench_postgres_pipeline.py --sessions 50  # a quicker look

Rounds of the two alternate (``--rounds``, 3), so both see the same machine: a shared VM's
speed drifts by a factor of two over minutes here; each goes first every other round. Prints turns per second and p50/p99 turn
time of each (the round of median rate), and PostgreSQL's rate over SQLite's, the median of
the rounds' ratios and each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import Run, percentile, pipeline

from clawbot.providers import litellm_module
from clawbot.testing import ScriptedModel
from tests.postgres_server import PostgresServer


def report(name: str, run: Run) -> None:
    p50 = percentile(run.durations, 0.50) * 1000
    p99 = percentile(run.durations, 0.99) * 1000
    print(f"  {name:<12} {run.rate:8.0f} turns/s   p50 {p50:7.2f} ms   p99 {p99:7.2f} ms")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = ScriptedModel(name="bench", default_text="Fine, thanks.", record=False)
    server = PostgresServer()
    server.start()
    sqlite: list[Run] = []
    postgres: list[Run] = []
    try:
        with model.installed():
            litellm_module()
            for round_ in range(args.rounds):  # interleaved: both see the same machine
                # Each goes first every other round (ABBA), so neither is always the one
                # run on a machine the other just warmed, or just loaded.
                for backend in ("sqlite", "postgres")[:: 1 if round_ % 2 == 0 else -1]:
                    with tempfile.TemporaryDirectory() as home:
                        url = server.new_database() if backend == "postgres" else None
                        run = await pipeline(
                            Path(home), model, args.sessions, args.turns, 60, database_url=url
                        )
                    (postgres if url else sqlite).append(run)
    finally:
        server.stop()
    print(
        f"{args.sessions} sessions x {args.turns} turns, one process, scripted model (0 ms),"
        f" {args.rounds} rounds of each, interleaved; the round of median rate shown"
    )
    report("SQLite", median_run(sqlite))
    report("PostgreSQL", median_run(postgres))
    ratios = sorted(p.rate / s.rate for s, p in zip(sqlite, postgres, strict=True))
    print(
        f"  PostgreSQL / SQLite {statistics.median(ratios):8.2f}    (goal >= 0.70;"
        f" round by round {', '.join(f'{r:.2f}' for r in ratios)})"
    )


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda run: run.rate)[len(runs) // 2]


if __name__ == "__main__":
    asyncio.run(main())
