"""Where the TOML settings files are, and a readable error for a broken one: below the
settings model, which reads them as one of its sources."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

from pydantic_settings import InitSettingsSource, PydanticBaseSettingsSource

from clawbot.errors import ConfigError

CONFIG_NAME = "clawbot.toml"
DEFAULT_HOME = Path("~/.clawbot")


def config_file() -> Path:
    """The current folder's TOML settings file: CLAWBOT_CONFIG, else ``clawbot.toml`` here."""
    return Path(os.environ.get("CLAWBOT_CONFIG", CONFIG_NAME))


def config_files(home: Path) -> list[Path]:
    """The TOML settings files clawbot looks for, in the order they are read (a later one
    overrides an earlier one): the home's, then the current folder's. One file named twice
    (the home is the current folder) is read once."""
    files = [home.expanduser() / CONFIG_NAME, config_file()]
    if files[0].resolve() == files[1].resolve():
        return files[:1]
    return files


def home_env_file(home: Path) -> Path | None:
    """The home's ``.env`` (where ``clawbot onboard`` keeps keys and tokens), read below the
    current folder's own; None when it is the current folder's (read once) or absent."""
    path = home.expanduser() / ".env"
    if not path.is_file() or path.resolve() == Path(".env").resolve():
        return None
    return path


def home_before_files(*sources: PydanticBaseSettingsSource) -> Path:
    """The home folder as the sources above the files, then the current folder's file, set
    it: the home's own ``clawbot.toml`` is read from there, so it cannot move it."""
    for source in sources:
        values = source.init_kwargs if isinstance(source, InitSettingsSource) else source()
        if values.get("home"):
            return Path(str(values["home"]))
    local = config_file()
    if local.is_file():
        try:
            with local.open("rb") as file:
                home = tomllib.load(file).get("home")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            home = None  # reported by load_settings, naming the file
        if isinstance(home, str) and home:
            return Path(home)
    return DEFAULT_HOME


def check_config_file(path: Path, *, in_home: bool = False) -> None:
    """A ConfigError naming ``path`` (and the line) when it is not readable TOML, or when the
    home's own file (``in_home``) sets the home.

    pydantic-settings reports a broken file with the parser's words alone, which do not say
    which file; parsing it once more here first is cheap.
    """
    if not path.is_file():
        return
    where = path.absolute()
    try:
        with path.open("rb") as file:
            values = tomllib.load(file)
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        line = re.search(r"\bline (\d+)", reason)
        raise ConfigError(
            f"the settings file {where} is not valid TOML: {reason[:1].lower()}{reason[1:]}",
            hint=f"correct {f'line {line[1]}' if line else 'the file'} and start clawbot again",
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(
            f"the settings file {where} is not UTF-8 text",
            hint="save it as UTF-8 and start clawbot again",
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"the settings file {where} cannot be read: {exc.strerror}",
            hint="make it readable, or set CLAWBOT_CONFIG to another file",
        ) from None
    if in_home and "home" in values:
        raise ConfigError(
            f"the settings file {where} sets home, but it is read from the home itself",
            hint="remove home there; set CLAWBOT_HOME, --home or home in the current "
            "folder's clawbot.toml instead",
        )
