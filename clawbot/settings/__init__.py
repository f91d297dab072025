"""Settings: what an operator can set, from the environment, ``.env`` and ``clawbot.toml``.

Precedence, highest first: explicit overrides (CLI flags), environment, ``.env``, the current
folder's ``clawbot.toml`` (or ``CLAWBOT_CONFIG``'s file), the home's ``clawbot.toml``,
defaults: the home's file is the base a project folder's file overrides, table by table.
Every setting is listed with a comment in ``.env.example``.

One :class:`Settings` holds every field; a concern with many settings keeps its fields in a
mixin module of its own here (``platforms``, ``tools``), added to Settings' bases. Owns: the
settings model and where its files are. Never imports: anything in clawbot/ above the
foundation.
"""

from clawbot.settings.files import (
    CONFIG_NAME,
    DEFAULT_HOME,
    config_file,
    config_files,
    home_env_file,
)
from clawbot.settings.model import (
    DmPolicy,
    PeerGroup,
    Settings,
    config_files_read,
    load_settings,
)

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_HOME",
    "DmPolicy",
    "PeerGroup",
    "Settings",
    "config_file",
    "config_files",
    "config_files_read",
    "home_env_file",
    "load_settings",
]
