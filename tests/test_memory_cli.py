"""`clawbot memory search | export | import | forget`: the memories from the shell. An export
imported into another home gives the same export back; a broken import line is reported
by its number and the good lines are kept."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawbot.cli.main import app
from clawbot.store import SqliteStore

runner = CliRunner()


@pytest.fixture(autouse=True)
def forget_cli_log_handlers() -> Iterator[None]:
    """The CLI logs to the stderr it was given; CliRunner's capture is gone after a test."""
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_clawbot", False):
            root.removeHandler(handler)


async def _seed(home: Path) -> None:
    store = await SqliteStore.open(home / "clawbot.db")
    try:
        for namespace, key, text, tags in [
            ("main", "colour", "Favourite colour: blue", ("prefs",)),
            ("main", "poem", 'Line one\nLine "two" — ünïcödé\n', ()),
            ("scout", "colour", "The door is red", ("seen", "doors")),
        ]:
            await store.memories.put(
                namespace=namespace,
                key=key,
                text=text,
                tags=tags,
                session_key=f"telegram:{key}",
                agent_id=namespace,
            )
    finally:
        await store.close()


def _count(home: Path) -> int:
    async def count() -> int:
        store = await SqliteStore.open(home / "clawbot.db")
        try:
            return await store.memories.count()
        finally:
            await store.close()

    return asyncio.run(count())


def test_an_export_imported_into_another_home_exports_the_same_again(tmp_path: Path) -> None:
    asyncio.run(_seed(tmp_path / "a"))
    exported = tmp_path / "memories.jsonl"

    first = runner.invoke(
        app, ["memory", "export", "--output", str(exported), "--home", str(tmp_path / "a")]
    )
    loaded = runner.invoke(app, ["memory", "import", str(exported), "--home", str(tmp_path / "b")])
    again = runner.invoke(app, ["memory", "export", "--home", str(tmp_path / "b")])

    assert first.exit_code == 0, first.output
    assert loaded.exit_code == 0, loaded.output
    assert "Imported 3 memories" in loaded.stdout
    assert again.stdout == exported.read_text(encoding="utf-8")
    assert len(again.stdout.splitlines()) == 3
    assert json.loads(again.stdout.splitlines()[1])["text"] == 'Line one\nLine "two" — ünïcödé\n'


def test_the_markdown_export_shows_every_memory_under_its_reference(tmp_path: Path) -> None:
    asyncio.run(_seed(tmp_path))

    result = runner.invoke(app, ["memory", "export", "--format", "md", "--home", str(tmp_path)])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Memories (3)")
    assert "## main:colour\n\n_tags: prefs · written by main in telegram:colour" in result.stdout
    assert "## scout:colour" in result.stdout and "The door is red" in result.stdout


def test_an_unknown_export_format_is_one_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["memory", "export", "--format", "xml", "--home", str(tmp_path)])

    assert result.exit_code == 2
    assert "unknown format 'xml': use jsonl or md" in result.stderr


def test_an_import_reports_broken_lines_by_number_and_keeps_the_good_ones(
    tmp_path: Path,
) -> None:
    good = {
        "namespace": "main",
        "key": "colour",
        "text": "blue",
        "tags": ["prefs"],
        "session_key": "cli",
        "agent_id": "main",
        "created_at": "2026-01-02T03:04:05+00:00",
        "updated_at": "2026-01-02T03:04:05+00:00",
    }
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({**good, "key": "a:b"}),
        "",
        json.dumps({k: v for k, v in good.items() if k != "agent_id"}),
        json.dumps({**good, "key": "essay", "text": "x" * 5000}),
        json.dumps({**good, "key": "pet", "text": "a cat"}),
    ]
    file = tmp_path / "in.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")

    result = runner.invoke(app, ["memory", "import", str(file), "--home", str(tmp_path)])

    assert result.exit_code == 1
    assert "Imported 2 memories" in result.stdout and "4 lines left out" in result.stdout
    assert f"{file}:2: left out: not valid JSON" in result.stderr
    assert f"{file}:3: left out: the memory key 'a:b' is not valid" in result.stderr
    assert f"{file}:5: left out: agent_id: Field required" in result.stderr
    assert f"{file}:6: left out: the memory is 5,000 characters" in result.stderr
    assert _count(tmp_path) == 2


def test_search_prints_the_best_matches_and_takes_any_characters(tmp_path: Path) -> None:
    asyncio.run(_seed(tmp_path))

    found = runner.invoke(app, ["memory", "search", "colour", "--home", str(tmp_path)])
    scoped = runner.invoke(
        app, ["memory", "search", '"colour* NEAR (', "--agent", "scout", "--home", str(tmp_path)]
    )
    nothing = runner.invoke(app, ["memory", "search", "zebra", "--home", str(tmp_path)])
    empty = runner.invoke(app, ["memory", "search", " ", "--home", str(tmp_path)])

    assert found.exit_code == 0, found.output
    assert sorted(found.stdout.splitlines()) == [
        "main:colour [prefs]: Favourite colour: blue",
        "scout:colour [seen, doors]: The door is red",
    ]
    assert scoped.stdout.splitlines() == ["scout:colour [seen, doors]: The door is red"]
    assert nothing.exit_code == 0 and "No memory matches 'zebra'." in nothing.stderr
    assert empty.exit_code == 2 and "the query is empty" in empty.stderr


def test_forget_deletes_one_memory_and_says_so_when_there_is_none(tmp_path: Path) -> None:
    asyncio.run(_seed(tmp_path))

    forgot = runner.invoke(app, ["memory", "forget", "scout:colour", "--home", str(tmp_path)])
    bare = runner.invoke(app, ["memory", "forget", "colour", "--home", str(tmp_path)])
    again = runner.invoke(app, ["memory", "forget", "colour", "--home", str(tmp_path)])

    assert forgot.stdout == "Forgot scout:colour.\n"
    assert bare.stdout == "Forgot main:colour.\n"
    assert again.exit_code == 1
    assert "no memory main:colour" in again.stderr
    assert _count(tmp_path) == 1
