"""The benchmarks the README quotes still run: each, at a tiny size, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize(
    ("script", "args", "expected"),
    [
        (
            "bench_pipeline.py",
            ["--sessions", "5", "--turns", "2", "--long-turns", "20"],
            ["ratio end-to-end / bare", "relative to bare litellm", "clawbot --help"],
        ),
        (
            "bench_streaming.py",
            [
                *["--replies", "1", "--token-ms", "1", "--reply-chars", "80", "--rounds", "1"],
                *["--sessions", "3", "--turns", "2", "--calls", "5", "--model-ms", "1"],
                *["--real-model-ms", "5"],
            ],
            [
                "first token to first visible text",
                "preview calls per reply",
                "ratio on / off",
                "stream_chunk_builder",
            ],
        ),
        (
            "bench_scheduling.py",
            ["--sessions", "4", "--messages", "3"],
            ["burst:", "conversation:", "steer:", "scheduling adds"],
        ),
        ("bench_adapters.py", ["--messages", "50"], ["inbound telegram", "render+chunk plain"]),
        (
            "bench_schedules.py",
            ["--tasks", "50", "--idle", "0.5", "--due", "5", "--spread", "0.5"],
            ["idle CPU with 50 tasks", "5 of 5 due tasks ran", "lateness: p50"],
        ),
        (
            "bench_live_replies.py",
            ["--replies", "2", "--chars", "1500", "--chars-per-second", "3000"],
            ["first visible text", "telegram private chat (draft)", "slack channel", "refused"],
        ),
        (
            "bench_memory.py",
            ["--checkpoints", "2", "20", "50"],
            ["model call: direct", "per session", "growth from 2 to 50 sessions"],
        ),
        (
            "bench_memory.py",
            ["--checkpoints", "2", "10", "--litellm"],
            ["model call: litellm", "growth from 2 to 10 sessions"],
        ),
        (
            "bench_subagents.py",
            ["--children", "3", "--delay", "0"],
            ["3 of 3 reported", "spawn->announce overhead", "children completed per second"],
        ),
        (
            "bench_memories.py",
            ["--memories", "300", "--queries", "20", "--turns", "5"],
            ["memories/s", "FTS recall", "recall adds", "database size"],
        ),
        (
            "bench_memories.py",
            ["--memories", "300", "--queries", "20", "--turns", "5", "--embeddings", "local"],
            ["each embedded, local", "hybrid recall", "vectors loaded", "recall adds"],
        ),
        (
            "bench_ledger.py",
            ["--calls", "40", "--rounds", "2"],
            ["record a row", "allow + record, 3 budgets", "ledger adds to a call"],
        ),
        (
            "bench_compaction.py",
            ["--turns", "5"],
            ["check, gpt-4o-mini", "exact count near the limit", "compaction's check adds"],
        ),
        (
            "bench_startup.py",
            ["--runs", "1"],
            ["chat: start -> first reply", "run: start -> connected", "run: start -> first reply"],
        ),
        (
            "bench_turn_profile.py",
            ["--sessions", "3", "--turns", "1", "--tool", "list_dir"],
            ["turn profile: 3 sessions x 1 turns", "clawbot/runtime/turn.py:run_turn"],
        ),
        (
            "bench_turn_profile.py",
            [
                "--sessions",
                "3",
                "--turns",
                "1",
                "--count-lines",
                "--stub-litellm",
                "--fixed-timers",
            ],
            ["litellm stubbed", "Python lines run per turn", "in clawbot/"],
        ),
        (
            "bench_mcp.py",
            ["--calls", "5", "--warmup", "1"],
            ["direct call", "MCP over stdio", "MCP over streamable HTTP", "around the SDK"],
        ),
        (
            "bench_console.py",
            ["--messages", "300", "--children", "5", "--runs", "2"],
            ["conversation page, 300 messages", "tree page, 5 children", "sessions page"],
        ),
        (
            "bench_multiprocess.py",
            [*["--sessions", "3", "--turns", "1", "--messages", "2", "--processes", "2"]],
            [
                "PostgreSQL / SQLite",
                "1 process, SQLite",
                "1 process, PostgreSQL",
                "2 processes, PostgreSQL",
                "goal: 2 processes >= 1.6x one",
            ],
        ),
        (
            "bench_parts.py",
            ["no-intake-journal", "--rounds", "3", "--sessions", "3"],
            ["shipped", "no-intake-journal", "round by round: median"],
        ),
    ],
)
def test_a_benchmark_runs_and_prints_its_figures(
    script: str, args: list[str], expected: list[str]
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    for text in expected:
        assert text in done.stdout
