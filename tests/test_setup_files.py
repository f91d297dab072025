"""What a first run writes (clawbot.setup), below the terminal: the home's files edited in
place and replaced whole, the senders it takes, the manifest it shows; and the home's
``.env`` read as a settings source."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest
from dotenv import dotenv_values
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from clawbot.errors import ConfigError
from clawbot.settings import load_settings
from clawbot.setup.answers import OnboardAnswers, SenderError, access_problem, parse_senders
from clawbot.setup.home_files import edited_env, env_assignment, write_answers
from clawbot.setup.platforms import slack_manifest

ROOT = Path(__file__).resolve().parent.parent


def answers(**changes: object) -> OnboardAnswers:
    values: dict[str, object] = {
        "model": "openai/gpt-4o-mini",
        "provider_key": ("OPENAI_API_KEY", SecretStr("sk-new")),
        "platform": "telegram",
        "tokens": {"telegram_token": SecretStr("1:new")},
        "dm_policy": "pairing",
    }
    values.update(changes)
    return OnboardAnswers.model_validate(values)


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40))
def test_a_value_written_to_env_reads_back_unchanged(value: str) -> None:
    parsed = dotenv_values(stream=io.StringIO(env_assignment("KEY", value) + "\n"))

    assert parsed["KEY"] == value


def test_an_env_edit_replaces_a_key_where_it_stands_and_drops_its_repeats() -> None:
    text = "# keys\nA=1\nexport B=2\n\nB=3\nC=4\n"

    assert edited_env(text, {"B": "new", "D": "added"}) == "# keys\nA=1\nB=new\n\nC=4\nD=added\n"


def test_the_answers_repr_shows_no_secret() -> None:
    shown = repr(answers())

    assert "sk-new" not in shown and "1:new" not in shown


def test_write_answers_creates_the_env_file_for_its_owner_alone(tmp_path: Path) -> None:
    written = write_answers(tmp_path / "home", answers())

    assert stat.S_IMODE(written.env_file.stat().st_mode) == 0o600
    assert dotenv_values(written.env_file) == {
        "CLAWBOT_TELEGRAM_TOKEN": "1:new",
        "OPENAI_API_KEY": "sk-new",
    }


def test_write_answers_makes_an_existing_env_file_owner_only(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("A=1\n")
    (tmp_path / ".env").chmod(0o644)

    write_answers(tmp_path, answers())

    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600


def test_a_broken_clawbot_toml_stops_the_write_before_either_file_changes(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text("A=1\n")
    (tmp_path / "clawbot.toml").write_text("model = \n")

    with pytest.raises(ConfigError, match=r"clawbot.toml is not valid TOML"):
        write_answers(tmp_path, answers())

    assert (tmp_path / ".env").read_text() == "A=1\n"
    assert (tmp_path / "clawbot.toml").read_text() == "model = \n"


def test_senders_are_ids_of_the_platform_each_once() -> None:
    assert parse_senders("telegram", "1001, telegram:42 1001") == ("telegram:1001", "telegram:42")


@pytest.mark.parametrize(
    ("platform", "text"),
    [("telegram", "@ann"), ("telegram", "slack:U0123ABCD"), ("slack", "ann"), ("discord", "12")],
)
def test_a_sender_that_is_not_an_id_of_the_platform_is_refused(platform: str, text: str) -> None:
    with pytest.raises(SenderError, match=r"is not a .* id: expected"):
        parse_senders(platform, text)  # type: ignore[arg-type]


def test_the_slack_manifest_shown_is_the_one_in_the_docs() -> None:
    assert slack_manifest() in (ROOT / "docs" / "platforms.md").read_text()


def test_the_slack_manifest_names_the_configured_command() -> None:
    assert "- command: /bot " in slack_manifest("/bot")


def test_the_home_s_env_is_read_below_the_current_folder_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("CLAWBOT_MODEL=from/home\nCLAWBOT_AGENT=helper\n")
    (tmp_path / ".env").write_text("CLAWBOT_MODEL=from/folder\n")
    monkeypatch.setenv("CLAWBOT_HOME", str(home))

    settings = load_settings()

    assert (settings.model, settings.agent) == ("from/folder", "helper")


def test_the_home_s_env_wins_over_the_toml_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """.env files are above the TOML files: a key the home's .env sets wins over the same
    key in the home's clawbot.toml."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("CLAWBOT_MODEL=from/env\n")
    (home / "clawbot.toml").write_text('model = "from/toml"\n')
    monkeypatch.setenv("CLAWBOT_HOME", str(home))

    assert load_settings().model == "from/env"


def test_allowlist_with_nobody_listed_is_refused_and_pairing_is_not() -> None:
    assert access_problem("allowlist", ()) is not None
    assert access_problem("allowlist", ("telegram:1",)) is None
    assert access_problem("pairing", ()) is None
