"""The settings model: every field, read from the environment, a ``.env`` file and optional
``clawbot.toml`` files.

Precedence, highest first: explicit overrides (CLI flags), environment, ``.env``, the current
folder's ``clawbot.toml`` (or ``CLAWBOT_CONFIG``'s file), the home's ``clawbot.toml``,
defaults: the home's file is the base a project folder's file overrides, table by table.
Every setting is listed with a comment in ``.env.example``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
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
    DotEnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from clawbot.errors import ConfigError
from clawbot.policies import DEFAULT_PROFILE, Autonomy, RiskProfile
from clawbot.settings.console import ConsoleSettings
from clawbot.settings.cost import CostSettings
from clawbot.settings.database import DatabaseSettings
from clawbot.settings.fallbacks import FallbackSettings
from clawbot.settings.files import (
    DEFAULT_HOME,
    check_config_file,
    config_file,
    config_files,
    home_before_files,
    home_env_file,
)
from clawbot.settings.mcp import McpSettings
from clawbot.settings.media import MediaSettings
from clawbot.settings.platforms import PlatformSettings
from clawbot.settings.schedules import ScheduleSettings
from clawbot.settings.tools import ToolSettings

DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]


class PeerGroup(BaseModel):
    """A ``[peer_groups.<name>]`` table: agents whose sessions may message each other."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agents: tuple[str, ...] = Field(min_length=1)


class Settings(
    BaseSettings,
    PlatformSettings,
    ToolSettings,
    FallbackSettings,
    McpSettings,
    ConsoleSettings,
    ScheduleSettings,
    MediaSettings,
    CostSettings,
    DatabaseSettings,
):
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
        home = home_before_files(init_settings, env_settings, dotenv_settings)
        files = config_files(home)
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings, dotenv_settings]
        home_env = home_env_file(home)
        reads_dotenv = (
            isinstance(dotenv_settings, DotEnvSettingsSource) and dotenv_settings.env_file
        )
        if reads_dotenv and home_env is not None:
            # the home's .env (``clawbot onboard`` writes it) under the current folder's
            sources.append(DotEnvSettingsSource(settings_cls, env_file=home_env))
        return (
            *sources,
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
        return values + self.mcp_secret_values()

    @property
    def agents_dir(self) -> Path:
        return self.home / "agents"


def config_files_read(settings: Settings) -> list[Path]:
    """The settings files that exist and were read for ``settings``, in order."""
    return [path for path in config_files(settings.home) if path.is_file()]


def load_settings(**overrides: Any) -> Settings:
    """Load settings, turning validation failures into one ConfigError naming each setting."""
    clean = {key: value for key, value in overrides.items() if value is not None}
    check_config_file(config_file())
    home = clean.get("home") or os.environ.get("CLAWBOT_HOME") or home_before_files()
    for index, path in enumerate(config_files(Path(home))):
        check_config_file(path, in_home=index == 0)
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
