"""Settings of the built-in tools: memory, the shell and the web."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

SearchProvider = Literal["off", "searxng", "brave", "tavily"]


class ToolSettings(BaseModel):
    """Fields of :class:`~clawbot.settings.Settings` (a mixin: read through it)."""

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
        default=20.0,
        gt=0,
        le=600,
        description="seconds one web_fetch (redirects too) or one web_search may take",
    )
    web_max_bytes: int = Field(
        default=2_000_000,
        ge=1000,
        description="bytes of a response body web_fetch or web_search reads",
    )

    web_search: SearchProvider = Field(
        default="off",
        description="the provider behind web_search: searxng (CLAWBOT_SEARXNG_URL, no key), "
        "brave (BRAVE_API_KEY) or tavily (TAVILY_API_KEY); off: the tool is not offered",
    )
    searxng_url: str = Field(
        default="", description="the SearXNG instance web_search asks (JSON format enabled)"
    )
    brave_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("CLAWBOT_BRAVE_API_KEY", "BRAVE_API_KEY"),
        description="the Brave Search API key (its Search plan)",
    )
    brave_api_base: str = Field(
        default="https://api.search.brave.com", description="where the Brave Search API is"
    )
    tavily_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("CLAWBOT_TAVILY_API_KEY", "TAVILY_API_KEY"),
        description="the Tavily API key (tvly-...)",
    )
    tavily_api_base: str = Field(
        default="https://api.tavily.com", description="where the Tavily API is"
    )

    @field_validator("web_search", mode="before")
    @classmethod
    def _search_off_when_empty(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip().lower() or "off"
        return value
