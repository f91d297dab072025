"""Which database the store keeps everything in: the SQLite file in the home folder by
default, or the database ``CLAWBOT_DATABASE_URL`` names (docs/postgres.md)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

DATABASE_SCHEMES = ("postgresql", "postgres", "sqlite")


class DatabaseSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

    database_url: SecretStr | None = Field(
        default=None,
        description="postgresql://user:password@host:port/database for PostgreSQL (the "
        "postgres extra), or sqlite:///path/to/clawbot.db; unset: HOME/clawbot.db. A secret: "
        "it may hold a password, so it is never shown",
    )
    leader_retry_seconds: float = Field(
        default=1.5,
        gt=0,
        le=60,
        description="on PostgreSQL, how often a process that does not hold a platform "
        "connection allowed once per bot (Telegram long polling) tries to take it over, and "
        "how often the one that holds it checks its lock: a dead leader is replaced within "
        "about this long",
    )

    @field_validator("database_url")
    @classmethod
    def _known_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        scheme = urlsplit(value.get_secret_value()).scheme
        if scheme not in DATABASE_SCHEMES:
            raise ValueError(
                f"CLAWBOT_DATABASE_URL must start with postgresql:// or sqlite:///, not {scheme!r}"
            )
        return value
