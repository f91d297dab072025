"""The assembled bot: store, workspace, tools, runtime, router and outbox from settings."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

from clawbot.agents import DEFAULT_AGENT, AgentSpec
from clawbot.channels import Adapter
from clawbot.commands import CommandRegistry, builtin_commands
from clawbot.file_tools import file_tools
from clawbot.home import prepare_home
from clawbot.llm import ModelClient
from clawbot.outbox import Outbox
from clawbot.router import AccessCheck, Router, allow_everyone
from clawbot.runtime import AgentResolver, Runtime
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.tools import ToolRegistry
from clawbot.workspace import Workspace


def default_agents(agent_id: str) -> AgentSpec:
    """Without an agent registry every session is driven by the built-in main agent."""
    return DEFAULT_AGENT


@dataclass
class Clawbot:
    settings: Settings
    store: Store
    workspace: Workspace
    tools: ToolRegistry
    runtime: Runtime
    router: Router
    outbox: Outbox

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        client: ModelClient | None = None,
        tools: ToolRegistry | None = None,
        agents: AgentResolver = default_agents,
        commands: CommandRegistry | None = None,
        access: AccessCheck = allow_everyone,
    ) -> Clawbot:
        """Prepare the home folder, open and migrate the database, wire the pipeline."""
        prepare_home(settings)
        workspace = Workspace(settings.workspace_dir)
        store = await Store.open(settings.db_path, synchronous=settings.db_synchronous)
        registry = tools if tools is not None else ToolRegistry(file_tools())
        runtime = Runtime(
            settings=settings,
            store=store,
            tools=registry,
            workspace=workspace,
            client=client
            or ModelClient(
                timeout=settings.provider_timeout,
                retries=settings.provider_retries,
                backoff=settings.retry_backoff,
            ),
            agents=agents,
        )
        outbox = Outbox()
        router = Router(
            settings=settings,
            store=store,
            runtime=runtime,
            outbox=outbox,
            commands=commands or builtin_commands(),
            access=access,
        )
        return cls(settings, store, workspace, registry, runtime, router, outbox)

    def connect(self, adapter: Adapter) -> None:
        self.outbox.connect(adapter)

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> Clawbot:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
