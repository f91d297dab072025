"""The whole pipeline on PostgreSQL beside SQLite, in one run: the same sessions x turns
through ``bench_pipeline.pipeline`` with a zero-latency scripted model, the store on the
home's SQLite file and then on a PostgreSQL server started in a temporary folder
(tests/postgres_server.py). One process; several processes on one database come later.

    .venv/bin/python bench/bench_postgres_pipeline.py                # 200 sessions x 5 turns
    .venv/bin/python bench/bench_postgres_pipeline.py --sessions 50  # a quicker look

Prints turns per second and p50/p99 turn time of each, and PostgreSQL's rate over SQLite's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
    args = parser.parse_args()
    model = ScriptedModel(name="bench", default_text="Fine, thanks.", record=False)
    server = PostgresServer()
    server.start()
    try:
        with model.installed():
            litellm_module()
            with tempfile.TemporaryDirectory() as home:
                sqlite = await pipeline(Path(home), model, args.sessions, args.turns, 60)
            with tempfile.TemporaryDirectory() as home:
                postgres = await pipeline(
                    Path(home),
                    model,
                    args.sessions,
                    args.turns,
                    60,
                    database_url=server.new_database(),
                )
    finally:
        server.stop()
    print(f"{args.sessions} sessions x {args.turns} turns, one process, scripted model (0 ms)")
    report("SQLite", sqlite)
    report("PostgreSQL", postgres)
    print(f"  PostgreSQL / SQLite {postgres.rate / sqlite.rate:8.2f}    (goal >= 0.70)")


if __name__ == "__main__":
    asyncio.run(main())
