"""The workspace folder as an operator meets it at start: the default one always exists,
a configured one is the operator's to provide."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clawbot.agents import home
from clawbot.errors import ConfigError
from clawbot.settings import Settings

from .standins.openai_api import OpenAIStandin
from .test_cli import environment, run

SHIPPED_WORKSPACE = Path(__file__).resolve().parent.parent / "workspace"


def test_a_deleted_default_workspace_is_recreated_from_the_shipped_one(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(tmp_path / "home", standin)
    run(["chat"], b"/status\n", env, tmp_path)
    shutil.rmtree(tmp_path / "home" / "workspace")

    result = run(["chat"], b"hi\n", env, tmp_path)

    assert result.returncode == 0, result.stderr.decode()
    assert "CLAWBOT_WORKSPACE" not in result.stderr.decode()
    soul = (SHIPPED_WORKSPACE / "SOUL.md").read_text()
    assert (tmp_path / "home" / "workspace" / "SOUL.md").read_text() == soul
    assert soul.strip() in standin.requests[-1]["messages"][0]["content"]


def test_a_file_deleted_from_the_default_workspace_stays_deleted(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    env = environment(tmp_path / "home", standin)
    run(["chat"], b"/status\n", env, tmp_path)
    (tmp_path / "home" / "workspace" / "SOUL.md").unlink()

    run(["chat"], b"hi\n", env, tmp_path)

    assert not (tmp_path / "home" / "workspace" / "SOUL.md").exists()


def test_a_missing_configured_workspace_is_an_error_naming_the_setting(
    standin: OpenAIStandin, tmp_path: Path
) -> None:
    missing = tmp_path / "missing"
    env = environment(tmp_path / "home", standin, CLAWBOT_WORKSPACE=str(missing))

    result = run(["chat"], b"hi\n", env, tmp_path)

    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        f"clawbot: the workspace folder {missing} does not exist — create it, or unset "
        "CLAWBOT_WORKSPACE to use the default one in CLAWBOT_HOME"
    ]
    assert not missing.exists()


def test_an_install_without_the_shipped_workspace_refuses_to_seed_an_empty_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(home, "SHIPPED_WORKSPACE", tmp_path / "site-packages" / "workspace")
    settings = Settings(home=tmp_path / "home", _env_file=None)  # type: ignore[call-arg]

    with pytest.raises(ConfigError) as refused:
        home.prepare_home(settings)

    assert "no shipped workspace and agents" in refused.value.message
    assert "pip install -e ." in (refused.value.hint or "")
    assert not (tmp_path / "home" / "agents").exists()
