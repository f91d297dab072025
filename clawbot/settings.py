"""Settings from the environment, a ``.env`` file and optional ``clawbot.toml`` files.

Precedence, highest first: explicit overrides (CLI flags), environment, ``.env``, the current
folder's ``clawbot.toml`` (or ``CLAWBOT_CONFIG``'s file), the home's ``clawbot.toml``,
defaults: the home's file is the base a project folder's file overrides, table by table.
Every setting is listed with a comment in ``.env.example``.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from clawbot.errors import ConfigError
from clawbot.policies import DEFAULT_PROFILE, Autonomy, RiskProfile

DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]
CONFIG_NAME = "clawbot.toml"
DEFAULT_HOME = Path("~/.clawbot")


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class PeerGroup(BaseModel):
    """A ``[peer_groups.<name>]`` table: agents whose sessions may message each other."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agents: tuple[str, ...] = Field(min_length=1)


class Settings(BaseSettings):
    """Everything an operator can set. Tokens are secrets: their repr never shows them."""

    model_config = SettingsConfigDict(
        env_prefix="CLAWBOT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        frozen=True,
        populate_by_name=True,
    )

    home: Path = Field(default=DEFAULT_HOME, description="database and user workspace")
    workspace: Path | None = Field(default=None, description="defaults to HOME/workspace")
    model: str = Field(default="openai/gpt-4o-mini", description="default litellm model string")
    agent: str = Field(default="main", description="agent used by new sessions")
    console_session: str = Field(default="local", min_length=1, max_length=64)
    max_tool_rounds: int = Field(default=8, ge=1, le=100)
    max_history_messages: int = Field(default=60, ge=2, le=10_000)
    compaction_auto: bool = Field(
        default=True,
        description="compact a conversation before a model call that nears the model's window",
    )
    compaction_threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="share of the model's input window a request may fill before the older "
        "part of the conversation is summarized",
    )
    compaction_keep_turns: int = Field(
        default=4, ge=1, le=100, description="latest turns a compaction keeps verbatim"
    )
    compaction_default_window: int = Field(
        default=16_000,
        ge=1000,
        description="input window, in tokens, of a model litellm does not know",
    )
    session_cache_size: int = Field(
        default=10_000, ge=1, description="sessions whose state and history stay in memory"
    )
    max_message_chars: int = Field(default=32_000, ge=1)
    rate_limit_per_minute: int = Field(
        default=30, ge=0, description="messages a minute one sender may send; 0 turns it off"
    )
    rate_limit_burst: int = Field(
        default=15, ge=1, description="messages one sender may send at once before the limit"
    )
    provider_timeout: float = Field(default=60.0, gt=0)
    provider_retries: int = Field(default=3, ge=0, le=10)
    retry_backoff: float = Field(default=1.0, ge=0)
    turn_deadline: float = Field(default=600.0, gt=0)
    tts_model: str | None = Field(
        default=None,
        description="a litellm speech model (openai/tts-1) that reads replies aloud as voice "
        "notes in the conversations that ask for it with /voice on; none: no voice notes",
    )
    tts_voice: str = Field(default="alloy", min_length=1, description="the speech model's voice")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    db_synchronous: Literal["OFF", "NORMAL", "FULL"] = "NORMAL"

    telegram_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_TELEGRAM_TOKEN", "TELEGRAM_BOT_TOKEN")
    )
    telegram_api_base: str = "https://api.telegram.org/bot"
    telegram_file_base: str = "https://api.telegram.org/file/bot"
    telegram_mode: Literal["polling", "webhook"] = "polling"
    telegram_webhook_url: str = ""
    telegram_webhook_listen: str = "127.0.0.1"
    telegram_webhook_port: int = Field(default=8443, ge=1, le=65535)
    telegram_webhook_path: str = "/telegram"
    telegram_webhook_secret: SecretStr | None = None

    discord_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_DISCORD_TOKEN", "DISCORD_BOT_TOKEN")
    )
    discord_api_base: str = "https://discord.com/api/v10"
    discord_catch_up_hours: float = Field(
        default=24.0,
        ge=0,
        description="on start, fetch Discord messages missed while offline (Discord never "
        "redelivers) from active conversations, up to this many hours old; 0 turns it off",
    )

    slack_bot_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN")
    )
    slack_app_token: SecretStr | None = Field(
        default=None, validation_alias=_env("CLAWBOT_SLACK_APP_TOKEN", "SLACK_APP_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None,
        validation_alias=_env("CLAWBOT_SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET"),
    )
    slack_api_base: str = "https://slack.com/api/"
    slack_mode: Literal["socket", "http"] = "socket"
    slack_http_host: str = "127.0.0.1"
    slack_http_port: int = Field(default=3000, ge=1, le=65535)
    slack_http_path: str = "/slack/events"
    slack_command: str = "/clawbot"

    dm_policy: DmPolicy = "pairing"
    allowed_senders: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allowed_groups: Annotated[list[str], NoDecode] = Field(default_factory=list)
    group_require_mention: bool = True
    ignore_other_bots: bool = True
    # images, voice and files people send (docs/media.md): the largest document or audio and
    # the largest image downloaded, files one message may carry, images of earlier messages a
    # request shows again, seconds a download may take, the speech-to-text model (empty: none)
    attachment_max_bytes: int = Field(default=20_000_000, ge=0)
    image_max_bytes: int = Field(default=5_000_000, ge=0)
    attachments_per_message: int = Field(default=10, ge=1, le=100)
    images_per_request: int = Field(default=4, ge=0, le=50)
    media_download_timeout: float = Field(default=60.0, gt=0, le=3600)
    transcription_model: str = ""
    shutdown_timeout: float = Field(default=20.0, gt=0)
    dm_policies: Annotated[dict[str, DmPolicy], NoDecode] = Field(
        default_factory=dict, description="per-channel DM policy overrides, channel:policy"
    )
    streaming: bool = True  # show replies while they are written (on or off)
    streaming_channels: Annotated[dict[str, bool], NoDecode] = Field(
        default_factory=dict, description="per-channel streaming overrides, channel:on|off"
    )

    lane_main: int = Field(default=8, ge=1, description="concurrent turns of user messages")
    lane_subagent: int = Field(default=8, ge=1, description="concurrent subagent turns")
    lane_cron: int = Field(default=2, ge=1, description="concurrent scheduled turns")
    lane_announce: int = Field(default=4, ge=1, description="concurrent internal announce turns")
    max_active_turns: int = Field(default=16, ge=1, description="concurrent turns in all lanes")
    job_lease: float = Field(default=60.0, gt=0, description="seconds a running job's lease lasts")
    job_max_attempts: int = Field(default=3, ge=1, description="starts before a job is failed")
    turn_watchdog: float = Field(default=300.0, gt=0, description="log turns held this long")

    max_spawn_depth: int = Field(
        default=1,
        ge=1,
        le=5,
        description="how deep subagents may nest: 1 lets a conversation's agent spawn children "
        "that cannot spawn their own",
    )
    max_children: int = Field(
        default=5, ge=1, le=100, description="children of one session running at once"
    )
    max_hops: int = Field(
        default=8,
        ge=1,
        le=100,
        description="messages one chain of agents may pass on (spawn, send) before the next "
        "is refused; stops agents that keep messaging each other",
    )
    subagent_timeout: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="seconds a child's run may take unless its spawn says otherwise; then it "
        "is stopped and reports status timeout",
    )
    max_concurrent: int = Field(
        default=3,
        ge=1,
        le=32,
        description="delegated tasks (delegate, agents as tools) running at once in this bot; "
        "more wait for a free slot",
    )

    memory_max_chars: int = Field(
        default=4000,
        ge=100,
        le=1_000_000,
        description="the longest text one memory may hold (memory_store, clawbot memory "
        "import); a longer one is refused with a clear error",
    )
    memory_embeddings: str = Field(
        default="off",
        min_length=1,
        description="semantic recall: off (full-text search alone), local (the wordllama "
        "model shipped in the semantic extra; nothing leaves the machine) or a litellm "
        "embedding model, e.g. openai/text-embedding-3-small (docs/memory.md)",
    )
    memory_embedding_dims: Literal[64, 128, 256] = Field(
        default=128, description="dimensions of the local model's vectors (64, 128 or 256)"
    )

    shell_timeout: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="seconds a shell_exec command may run at most (a call may ask for less); "
        "then it and everything it started are killed",
    )
    shell_max_output: int = Field(
        default=20_000,
        ge=1000,
        le=45_000,
        description="bytes of a command's output shell_exec returns (its start and its end)",
    )
    shell_network: bool = Field(
        default=False, description="whether sandboxed shell_exec commands may use the network"
    )
    shell_unsandboxed: Literal["refuse", "allow-host-access"] = Field(
        default="refuse",
        description="where bubblewrap cannot run: refuse (shell_exec is not offered) or "
        "allow-host-access (commands run on the host as the bot's user and can read and "
        "change every file it can: the .env with its keys and tokens, the database with "
        "every transcript; each call is unsafe and asks a person)",
    )
    web_allow_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="hosts web_fetch may reach although they resolve to private or loopback "
        "addresses (an intranet; 127.0.0.1 for a local test server)",
    )
    web_timeout: float = Field(
        default=20.0, gt=0, le=600, description="seconds one web_fetch may take, redirects too"
    )
    web_max_bytes: int = Field(
        default=2_000_000, ge=1000, description="bytes of a response body web_fetch reads"
    )

    risk_profiles: dict[str, RiskProfile] = Field(
        default_factory=dict,
        description="[risk_profiles.<name>] in clawbot.toml: autonomy (read_only, supervised, "
        "full), tools (allow/deny) and risk (a tool's level, only ever raised); an agent names "
        "its profile (risk_profile), 'default' when it does not",
    )
    autonomy: Autonomy = Field(
        default="supervised",
        description="the default risk profile's autonomy (read_only, supervised: guarded tools "
        "ask once per session, full: they run), unless [risk_profiles.default] sets it",
    )
    approval_timeout: float = Field(
        default=300.0, gt=0, description="seconds an approval request waits before it is denied"
    )
    approvers: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="who may answer approval requests in groups, channel:user_id (in a DM its "
        "owner always may)",
    )
    grants: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="standing grants: guarded tools that run without asking, e.g. file_write",
    )
    peer_groups: dict[str, PeerGroup] = Field(
        default_factory=dict,
        description="[peer_groups.<name>] agents = [...] in clawbot.toml: two agents' sessions "
        "may message each other (sessions_send) only when one group holds both",
    )

    @field_validator("home", "workspace", mode="after")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator(
        "allowed_senders", "allowed_groups", "web_allow_hosts", "approvers", "grants", mode="before"
    )
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("dm_policies", "streaming_channels", mode="before")
    @classmethod
    def _split_policies(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        example = (
            "channel:policy (e.g. telegram:open,slack:allowlist)"
            if info.field_name == "dm_policies"
            else "channel:on or channel:off (e.g. telegram:on,slack:off)"
        )
        policies: dict[str, str] = {}
        for item in value.split(","):
            if not item.strip():
                continue
            channel, sep, policy = item.partition(":")
            if not sep or not channel.strip():
                raise ValueError(f"{item.strip()!r} is not {example}")
            policies[channel.strip().lower()] = policy.strip().lower()
        return policies

    @field_validator("allowed_senders", "allowed_groups", "approvers", mode="after")
    @classmethod
    def _channel_qualified(cls, value: list[str]) -> list[str]:
        for item in value:
            channel, sep, ident = item.partition(":")
            if not sep or not channel or not ident:
                raise ValueError(f"{item!r} is not channel:id (e.g. telegram:12345)")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        home = _home_before_files(init_settings, env_settings, dotenv_settings)
        files = config_files(home)
        return (
            init_settings,
            env_settings,
            dotenv_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=files, deep_merge=True),
        )

    @property
    def db_path(self) -> Path:
        return self.home / "clawbot.db"

    @property
    def workspace_dir(self) -> Path:
        return self.workspace or self.home / "workspace"

    def risk_profile(self, name: str) -> RiskProfile | None:
        """The named profile; ``default`` is supervised unless settings say otherwise.
        None for a name settings lack (the caller treats the agent as read-only)."""
        profile = self.risk_profiles.get(name)
        if profile is None and name == DEFAULT_PROFILE:
            return RiskProfile(autonomy=self.autonomy)
        return profile

    def streams(self, channel: str) -> bool:
        """Whether replies in ``channel`` are shown while they are written."""
        return self.streaming_channels.get(channel, self.streaming)

    def secret_values(self) -> list[str]:
        """Every secret setting's value, for log redaction."""
        values = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                values.append(value.get_secret_value())
        return values

    @property
    def agents_dir(self) -> Path:
        return self.home / "agents"


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


def config_files_read(settings: Settings) -> list[Path]:
    """The settings files that exist and were read for ``settings``, in order."""
    return [path for path in config_files(settings.home) if path.is_file()]


def _home_before_files(*sources: PydanticBaseSettingsSource) -> Path:
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


def _check_config_file(path: Path, *, in_home: bool = False) -> None:
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


def load_settings(**overrides: Any) -> Settings:
    """Load settings, turning validation failures into one ConfigError naming each setting."""
    clean = {key: value for key, value in overrides.items() if value is not None}
    _check_config_file(config_file())
    home = clean.get("home") or os.environ.get("CLAWBOT_HOME") or _home_before_files()
    for index, path in enumerate(config_files(Path(home))):
        _check_config_file(path, in_home=index == 0)
    try:
        return Settings(**clean)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = ".".join(str(part) for part in error["loc"]) or "settings"
            env_name = f"CLAWBOT_{name.upper()}"
            problems.append(f"{env_name}: {error['msg']}")
        raise ConfigError(
            "invalid setting " + "; ".join(problems),
            hint="fix it in the environment, .env or clawbot.toml (see .env.example)",
        ) from None
    except ValueError as exc:  # a malformed clawbot.toml or .env
        raise ConfigError(f"cannot read settings: {exc}") from None
