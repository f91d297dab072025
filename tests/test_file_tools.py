"""File tools work inside the workspace and refuse every way out of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawbot.errors import WorkspaceError
from clawbot.file_tools import file_tools
from clawbot.messages import ToolCallBlock
from clawbot.sessions import Session
from clawbot.settings import Settings
from clawbot.tools import ToolContext, ToolRegistry
from clawbot.workspace import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.md").write_text("one\ntwo\n")
    (tmp_path / "outside.txt").write_text("top secret")
    return root


async def run(workspace: Path, name: str, **arguments: object) -> tuple[str, bool]:
    registry = ToolRegistry(file_tools())
    context = ToolContext(
        session=Session(key="k", channel="c", chat_id="1", agent_id="main"),
        workspace=workspace,
        settings=Settings(_env_file=None),  # type: ignore[call-arg]
    )
    result = await registry.execute(
        ToolCallBlock(id="1", name=name, arguments=dict(arguments)), context
    )
    return result.content, result.is_error


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd", "~/x"])
async def test_paths_that_leave_the_workspace_are_refused(workspace: Path, path: str) -> None:
    content, is_error = await run(workspace, "file_read", path=path)

    assert is_error
    assert "top secret" not in content
    assert "root:" not in content


async def test_a_symlink_leading_out_of_the_workspace_is_refused(workspace: Path) -> None:
    os.symlink(workspace.parent / "outside.txt", workspace / "link.txt")

    content, is_error = await run(workspace, "file_read", path="link.txt")

    assert is_error
    assert "outside the workspace" in content


async def test_writing_through_a_symlinked_folder_that_leaves_is_refused(workspace: Path) -> None:
    os.symlink(workspace.parent, workspace / "up")

    _, is_error = await run(workspace, "file_write", path="up/evil.txt", content="x")

    assert is_error
    assert not (workspace.parent / "evil.txt").exists()


async def test_a_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    os.symlink(workspace / "notes.md", workspace / "alias.md")

    content, is_error = await run(workspace, "file_read", path="alias.md")

    assert not is_error and content == "one\ntwo\n"


async def test_write_creates_folders_and_read_returns_the_content(workspace: Path) -> None:
    await run(workspace, "file_write", path="a/b/c.txt", content="hello")

    content, is_error = await run(workspace, "file_read", path="a/b/c.txt")

    assert (content, is_error) == ("hello", False)


async def test_edit_replaces_one_unique_occurrence(workspace: Path) -> None:
    _, is_error = await run(workspace, "file_edit", path="notes.md", old_text="two", new_text="2")

    assert not is_error
    assert (workspace / "notes.md").read_text() == "one\n2\n"


async def test_edit_refuses_ambiguous_text(workspace: Path) -> None:
    (workspace / "dup.md").write_text("x x")

    content, is_error = await run(workspace, "file_edit", path="dup.md", old_text="x", new_text="y")

    assert is_error and "occurs 2 times" in content
    assert (workspace / "dup.md").read_text() == "x x"


async def test_list_dir_shows_folders_first_with_a_slash(workspace: Path) -> None:
    (workspace / "sub").mkdir()

    content, _ = await run(workspace, "list_dir")

    assert content.splitlines() == ["sub/", "notes.md"]


def test_a_workspace_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace(tmp_path / "nope")


def test_tool_schema_is_derived_from_the_signature() -> None:
    tools = {t.name: t for t in file_tools()}

    schema = tools["file_edit"].parameters
    assert schema["required"] == ["path", "old_text", "new_text"]
    assert schema["properties"]["path"] == {
        "type": "string",
        "description": "file path relative to the workspace",
    }
    assert "ctx" not in schema["properties"]
    assert tools["list_dir"].parameters["properties"]["path"]["default"] == "."
