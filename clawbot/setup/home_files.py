"""The home's ``.env`` (keys and tokens) and ``clawbot.toml`` (everything else), as a first
run writes them.

Both are edited, never regenerated: a key already there is changed where it stands (a
second line of the same key goes), comments and unrelated lines stay, and a new key is
added at the end. Each file is replaced in one rename, after both were prepared, so an
interrupted run leaves them as they were; ``.env`` is readable by its owner only (0600).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from dotenv import dotenv_values

from clawbot.errors import ConfigError
from clawbot.settings import CONFIG_NAME
from clawbot.settings.files import check_config_file
from clawbot.setup.answers import OnboardAnswers
from clawbot.setup.platforms import PLATFORMS

ENV_NAME = ".env"
ENV_MODE = 0o600
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=")
_PLAIN = re.compile(r"[A-Za-z0-9_\-.:/+=@,~]*")


@dataclass(frozen=True)
class HomeSettings:
    """What the home's files hold now, to offer as the defaults of a run that edits them.
    Of ``.env`` only the names: a secret is never read back to be shown."""

    env_names: frozenset[str]
    toml: Mapping[str, Any]

    def value(self, name: str) -> Any:
        return self.toml.get(name)


@dataclass(frozen=True)
class Written:
    env_file: Path
    toml_file: Path


def read_home(home: Path) -> HomeSettings:
    """The home's settings as they stand; a ConfigError (naming the file and line) when its
    ``clawbot.toml`` cannot be read, which a run must not overwrite."""
    toml_path = home / CONFIG_NAME
    check_config_file(toml_path)
    toml: dict[str, Any] = {}
    if toml_path.is_file():
        with toml_path.open("rb") as file:
            toml = tomllib.load(file)
    env_path = home / ENV_NAME
    names = frozenset(dotenv_values(env_path)) if env_path.is_file() else frozenset()
    return HomeSettings(env_names=names, toml=toml)


def env_assignment(name: str, value: str) -> str:
    """``NAME=value`` as python-dotenv reads it back unchanged: bare when it can be, else
    single-quoted when it holds no quote, backslash or line break (python-dotenv reads
    ``\\`` and ``\'`` there as escapes), else double-quoted with escapes."""
    if _PLAIN.fullmatch(value):
        return f"{name}={value}"
    if not any(char in value for char in "'\\\n"):
        return f"{name}='{value}'"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'{name}="{escaped}"'


def edited_env(text: str, values: Mapping[str, str]) -> str:
    """``text`` (a .env file) with each of ``values`` set: its first line replaced, any
    later line of the same name dropped, the others appended; everything else as it was."""
    lines = text.splitlines()
    done: set[str] = set()
    kept: list[str] = []
    for line in lines:
        match = _ENV_LINE.match(line)
        name = match.group(1) if match else None
        if name is None or name not in values:
            kept.append(line)
        elif name not in done:
            kept.append(env_assignment(name, values[name]))
            done.add(name)
    kept += [env_assignment(name, value) for name, value in values.items() if name not in done]
    return "\n".join(kept) + "\n" if kept else ""


def edited_toml(text: str, values: Mapping[str, Any]) -> str:
    """``text`` (a TOML file) with each top-level key of ``values`` set in place, comments,
    tables and other keys kept (tomlkit keeps the file's own layout)."""
    document = tomlkit.parse(text)
    for name, value in values.items():
        document[name] = value
    return tomlkit.dumps(document)


def env_values(answers: OnboardAnswers) -> dict[str, str]:
    """The secrets of ``answers`` by the variable each is written as."""
    values: dict[str, str] = {}
    if answers.provider_key is not None:
        name, key = answers.provider_key
        values[name] = key.get_secret_value().strip()
    if answers.platform is not None:
        tokens = {field.setting: field.env for field in PLATFORMS[answers.platform].tokens}
        for setting, secret in answers.tokens.items():
            values[tokens[setting]] = secret.get_secret_value().strip()
    return values


def toml_values(answers: OnboardAnswers, home: HomeSettings) -> dict[str, Any]:
    """The rest of ``answers``, for ``clawbot.toml``: the model, the DM policy, and the
    allowed senders (those of other platforms already listed are kept)."""
    listed = home.value("allowed_senders")
    others = [
        str(sender)
        for sender in (listed if isinstance(listed, list) else [])
        if answers.platform is None or not str(sender).startswith(f"{answers.platform}:")
    ]
    return {
        "model": answers.model,
        "dm_policy": answers.dm_policy,
        "allowed_senders": [*others, *answers.allowed_senders],
    }


def overridden(
    answers: OnboardAnswers, home: HomeSettings, environment: Mapping[str, str]
) -> list[str]:
    """The variables of ``environment`` (the shell's, the current folder's .env) that would
    override, with another value, what ``answers`` write into the home: a note for the
    operator, who would otherwise wonder why ``clawbot run`` ignores the new answer."""
    values: dict[str, str] = dict(env_values(answers))
    for name, value in toml_values(answers, home).items():
        shown = ",".join(value) if isinstance(value, list) else str(value)
        values[f"CLAWBOT_{name.upper()}"] = shown
    return [name for name, value in values.items() if environment.get(name) not in (None, value)]


def write_answers(home: Path, answers: OnboardAnswers) -> Written:
    """Write ``answers`` into the home's ``.env`` and ``clawbot.toml``: both are prepared
    first (a broken file stops the run before either changes), then each replaced whole."""
    current = read_home(home)
    env_path, toml_path = home / ENV_NAME, home / CONFIG_NAME
    env_text = edited_env(_read(env_path), env_values(answers))
    toml_text = edited_toml(_read(toml_path), toml_values(answers, current))
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    toml_mode = toml_path.stat().st_mode & 0o777 if toml_path.exists() else 0o644
    replace_atomically(env_path, env_text, ENV_MODE)
    replace_atomically(toml_path, toml_text, toml_mode)
    return Written(env_file=env_path, toml_file=toml_path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read {path}: {type(exc).__name__}",
            hint="make it a readable UTF-8 file, or move it away, then run clawbot onboard again",
        ) from None


def replace_atomically(path: Path, text: str, mode: int) -> None:
    """``path`` holds ``text`` with ``mode``, or is unchanged: written beside it, flushed to
    disk, then renamed over it (a link at ``path`` is replaced, not followed)."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), mode)
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
