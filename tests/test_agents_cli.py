"""`clawbot agents list|show|export` as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clawbot.agents.files import read_agent_file
from clawbot.agents.home import prepare_home
from clawbot.agents.profiles import AgentSpec
from clawbot.agents.registry import AgentRegistry
from clawbot.settings import Settings
from clawbot.store import SqliteStore


def clawbot(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWBOT_")}
    env["CLAWBOT_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "clawbot", "agents", *args],
        env=env,
        cwd=home.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_list_prints_one_line_per_agent_and_reports_broken_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    (home / "agents" / "broken.toml").write_text('name = "Broken"\ntools = [\n')

    result = clawbot(home, "list")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "main",
        "coder",
        "coordinator",
        "researcher",
        "writer",
    ]
    assert lines[0].endswith("[default]")
    assert "clawbot: skipped broken.toml: line 2 (end of file): Invalid value" in result.stderr


async def test_export_writes_the_registry_including_agents_created_from_chat(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    prepare_home(Settings(home=home, _env_file=None))  # type: ignore[call-arg]
    store = await SqliteStore.open(home / "clawbot.db")
    registry = await AgentRegistry.open(store, home / "agents")
    created = AgentSpec(agent_id="poet", name="Poet", description="Writes verse.")
    await registry.create(created)
    await store.close()

    default = clawbot(home, "export")
    elsewhere = clawbot(home, "export", "--to", str(tmp_path / "repo-agents"))

    assert default.returncode == 0 and elsewhere.returncode == 0
    assert read_agent_file(home / "agents" / "poet.toml").spec == created
    assert read_agent_file(tmp_path / "repo-agents" / "poet.toml").spec == created
    assert len(list((tmp_path / "repo-agents").glob("*.toml"))) == 6
    assert "exported 6 agents to" in elsewhere.stderr


def test_show_prints_an_agent_as_toml_and_suggests_on_a_near_miss(tmp_path: Path) -> None:
    home = tmp_path / "home"

    shown = clawbot(home, "show", "coder")
    missed = clawbot(home, "show", "codr")

    assert shown.returncode == 0
    assert 'agent_id = "coder"' in shown.stdout
    assert 'allow = ["group:files", "skill_read"]' in shown.stdout
    assert missed.returncode == 1
    assert missed.stderr.strip() == "clawbot: no agent is called 'codr' — did you mean coder?"
