"""Settings: environment, .env and clawbot.toml, with clear errors naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawbot.errors import ConfigError
from clawbot.settings import config_files_read, load_settings

from .test_cli import environment, run


def test_defaults_need_no_configuration() -> None:
    settings = load_settings()

    assert settings.model == "openai/gpt-4o-mini"
    assert settings.home == Path("~/.clawbot").expanduser()


def test_an_invalid_number_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_MAX_TOOL_ROUNDS", "lots")

    with pytest.raises(ConfigError, match="CLAWBOT_MAX_TOOL_ROUNDS"):
        load_settings()


def test_an_out_of_range_value_says_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_MAX_TOOL_ROUNDS", "0")

    with pytest.raises(
        ConfigError, match=r"CLAWBOT_MAX_TOOL_ROUNDS: Input should be greater than or equal to 1"
    ):
        load_settings()


def test_an_unknown_choice_lists_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_DM_POLICY", "everyone")

    with pytest.raises(
        ConfigError, match=r"CLAWBOT_DM_POLICY.*'pairing', 'allowlist', 'open' or 'disabled'"
    ):
        load_settings()


def test_dotenv_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CLAWBOT_MODEL=anthropic/claude-sonnet-4\n")

    assert load_settings().model == "anthropic/claude-sonnet-4"


def test_toml_file_is_read_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "clawbot.toml").write_text('model = "ollama/llama3"\nmax_tool_rounds = 4\n')
    monkeypatch.setenv("CLAWBOT_MAX_TOOL_ROUNDS", "5")

    settings = load_settings()

    assert (settings.model, settings.max_tool_rounds) == ("ollama/llama3", 5)


def test_the_homes_toml_is_read_first_and_the_current_folders_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "clawbot.toml").write_text(
        'model = "ollama/llama3"\nmax_tool_rounds = 4\n'
        '[peer_groups.writers]\nagents = ["main", "writer"]\n'
    )
    (tmp_path / "clawbot.toml").write_text(
        'model = "ollama/mistral"\n[peer_groups.research]\nagents = ["main", "researcher"]\n'
    )
    monkeypatch.setenv("CLAWBOT_HOME", str(home))

    settings = load_settings()

    assert (settings.model, settings.max_tool_rounds) == ("ollama/mistral", 4)
    assert sorted(settings.peer_groups) == ["research", "writers"]  # tables merge
    assert config_files_read(settings) == [home / "clawbot.toml", Path("clawbot.toml")]


def test_the_home_named_in_the_current_folders_toml_has_its_own_toml_read(
    tmp_path: Path,
) -> None:
    home = tmp_path / "elsewhere"
    home.mkdir()
    (home / "clawbot.toml").write_text("max_tool_rounds = 7\n")
    (tmp_path / "clawbot.toml").write_text(f'home = "{home}"\n')

    settings = load_settings()

    assert (settings.home, settings.max_tool_rounds) == (home, 7)


def test_the_homes_toml_cannot_move_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "clawbot.toml").write_text(f'home = "{tmp_path / "other"}"\n')
    monkeypatch.setenv("CLAWBOT_HOME", str(home))

    with pytest.raises(ConfigError, match="sets home, but it is read from the home itself"):
        load_settings()


def test_a_broken_toml_file_is_named_with_its_line_and_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "clawbot.toml").write_text('model = "openai/gpt-4o"\nmax_tool_rounds = \n')
    env = environment(tmp_path / "home", OPENAI_API_KEY="sk-test-not-a-real-key-000000")

    result = run(["chat"], b"hi\n", env, tmp_path)

    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        f"clawbot: the settings file {tmp_path / 'clawbot.toml'} is not valid TOML: invalid value"
        " (at line 2, column 19) — correct line 2 and start clawbot again"
    ]


def test_cli_overrides_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_MODEL", "openai/gpt-4o")

    assert load_settings(model="groq/llama3-8b-8192").model == "groq/llama3-8b-8192"


def test_tokens_never_show_in_repr_or_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:SECRETSECRETSECRET")

    settings = load_settings()

    assert settings.telegram_token is not None
    assert "SECRETSECRET" not in repr(settings)
    assert "SECRETSECRET" not in str(settings.model_dump())


def test_comma_separated_lists_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_ALLOWED_SENDERS", "telegram:1, slack:U2")

    assert load_settings().allowed_senders == ["telegram:1", "slack:U2"]


def test_streaming_is_on_unless_turned_off_and_a_channel_may_differ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().streams("telegram")

    monkeypatch.setenv("CLAWBOT_STREAMING", "off")
    monkeypatch.setenv("CLAWBOT_STREAMING_CHANNELS", "Telegram:on, slack:off")
    settings = load_settings()

    assert (settings.streams("telegram"), settings.streams("slack")) == (True, False)
    assert not settings.streams("discord")


def test_a_streaming_override_without_its_channel_says_how_to_write_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAWBOT_STREAMING_CHANNELS", "telegram")

    with pytest.raises(ConfigError, match="channel:on or channel:off"):
        load_settings()


def test_every_setting_is_documented_in_env_example() -> None:
    from clawbot.settings import Settings

    example = (Path(__file__).resolve().parent.parent / ".env.example").read_text()
    for name, field in Settings.model_fields.items():
        aliases = getattr(field.validation_alias, "choices", None) or [f"CLAWBOT_{name.upper()}"]
        assert str(aliases[0]) in example, name  # the name the README uses
