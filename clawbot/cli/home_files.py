"""The home's settings files as ``clawbot onboard`` writes them: secrets in ``.env``, the
rest in ``clawbot.toml``. A key already there is replaced where it stands, a new one is
added, and every other line is kept as it was: running onboard again edits, never
duplicates."""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from clawbot.errors import ConfigError

TomlValue = str | list[str]


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by its owner alone (the file holds keys and tokens)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    path.chmod(0o600)


def set_env_values(path: Path, values: Mapping[str, str]) -> None:
    """Set ``NAME=value`` lines in a dotenv file."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    left = dict(values)
    for index, line in enumerate(lines):
        name = line.split("=", 1)[0].strip().removeprefix("export ").strip()
        if "=" in line and not line.lstrip().startswith("#") and name in left:
            lines[index] = f"{name}={_env_value(left.pop(name))}"
    lines += [f"{name}={_env_value(value)}" for name, value in left.items()]
    _write_private(path, "\n".join(lines) + "\n")


def _env_value(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_\-.:/@+=,]*", value):
        return value
    return "'" + value.replace("'", "") + "'"


def set_toml_values(path: Path, values: Mapping[str, TomlValue]) -> None:
    """Set top-level ``key = value`` lines of a TOML file (before its first table)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid TOML ({exc}), so onboard leaves it alone",
            hint="correct it (or move it away) and run clawbot onboard again",
        ) from None
    lines = text.splitlines()
    first_table = next(
        (i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines)
    )
    left = dict(values)
    for index in range(first_table):
        key = lines[index].split("=", 1)[0].strip()
        if "=" in lines[index] and not lines[index].lstrip().startswith("#") and key in left:
            lines[index] = f"{key} = {_toml_value(left.pop(key))}"
    added = [f"{key} = {_toml_value(value)}" for key, value in left.items()]
    lines[first_table:first_table] = added
    updated = "\n".join(lines) + "\n"
    tomllib.loads(updated)  # what it wrote reads back
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(updated, encoding="utf-8")


def _toml_value(value: TomlValue) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string or list of strings is TOML
