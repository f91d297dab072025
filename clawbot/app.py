"""The assembled bot: store, workspace, tools, runtime, router and outbox from settings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from clawbot.agents.home import prepare_home
from clawbot.agents.model_catalog import ModelCatalog
from clawbot.agents.registry import AgentRegistry
from clawbot.agents.switchboard import Switchboard
from clawbot.agents.workspace import Workspace
from clawbot.channels.interface import Adapter
from clawbot.channels.outbox import Outbox
from clawbot.clock import Clock, SystemClock
from clawbot.commands.agents import register_agent_commands
from clawbot.commands.approvals import register_approval_commands
from clawbot.commands.builtin import builtin_commands
from clawbot.commands.compaction import register_compaction_commands
from clawbot.commands.memory import register_memory_commands
from clawbot.commands.queue import register_queue_commands
from clawbot.commands.registry import CommandRegistry
from clawbot.commands.schedules import register_schedule_commands
from clawbot.commands.subagents import register_subagent_commands
from clawbot.commands.usage import register_usage_commands
from clawbot.commands.voice import register_voice_commands
from clawbot.errors import ConfigError
from clawbot.media.plugin import MediaIn
from clawbot.memory.embeddings import LitellmEmbedder, configured_embedder
from clawbot.memory.recall import MemoryRecall
from clawbot.providers import load_litellm
from clawbot.redaction import redactor
from clawbot.routing.router import AccessCheck, Router, allow_everyone
from clawbot.runtime.budgets import Budgets
from clawbot.runtime.fallbacks import FallbackNotices
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.metering import UsageMeter
from clawbot.runtime.model_health import ModelHealth
from clawbot.runtime.plugins import TurnPlugin, TurnStart
from clawbot.runtime.speech import VoiceReplies
from clawbot.runtime.turn import AgentResolver, Runtime
from clawbot.schedules.heartbeat import Heartbeat
from clawbot.schedules.runner import ScheduleRunner
from clawbot.scheduling.scheduler import Scheduler
from clawbot.scheduling.streaming import StreamingTurns
from clawbot.security.approvals import Approvals
from clawbot.security.gate import ToolGate
from clawbot.security.paused_rounds import PausedRound
from clawbot.settings import Settings
from clawbot.store import Store, open_store
from clawbot.subagents.ceiling import session_reach
from clawbot.subagents.context import AnnounceContext
from clawbot.subagents.control import SubagentControl
from clawbot.subagents.delegate_tools import AgentTools, delegate_tool
from clawbot.subagents.messaging import SubagentMessenger, message_tool
from clawbot.subagents.scratchpad import CoordinatorNotes, scratchpad_tools
from clawbot.subagents.session_tools import session_tools
from clawbot.tools.agents import agent_tools
from clawbot.tools.files import file_tools
from clawbot.tools.memory import memory_tools
from clawbot.tools.registry import ToolRegistry
from clawbot.tools.sandbox import find_bubblewrap
from clawbot.tools.sending import send_file_tool
from clawbot.tools.shell import shell_tools
from clawbot.tools.skills import skill_tools
from clawbot.tools.web import web_fetch_tool
from clawbot.tools.web_search import web_search_tools


def default_tools(settings: Settings | None = None) -> ToolRegistry:
    """The built-in tools; without ``settings`` the shell only where bubblewrap runs, and
    no web_search (its provider is a setting)."""
    return ToolRegistry(
        [
            *file_tools(),
            *shell_tools(find_bubblewrap(), settings),
            web_fetch_tool(),
            *web_search_tools(settings),
            *skill_tools(),
            *agent_tools(),
            *scratchpad_tools(),
        ]
    )


def mcp_servers(settings: Settings, registry: ToolRegistry) -> list[TurnPlugin]:
    """The MCP servers' plug-in, when settings list any: the SDK (about a second to import)
    is imported only then."""
    if not settings.mcp_servers:
        return []
    from clawbot.mcp.plugin import McpServers

    return [McpServers(settings, registry)]


@dataclass
class Clawbot:
    settings: Settings
    store: Store
    workspace: Workspace
    tools: ToolRegistry
    runtime: Runtime
    router: Router
    outbox: Outbox
    agents: AgentRegistry
    switchboard: Switchboard
    scheduler: Scheduler
    subagents: SubagentControl
    approvals: Approvals
    schedules: ScheduleRunner

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        client: ModelClient | None = None,
        tools: ToolRegistry | None = None,
        agents: AgentResolver | None = None,
        commands: CommandRegistry | None = None,
        access: AccessCheck = allow_everyone,
        clock: Clock | None = None,
        plugins: Sequence[TurnPlugin] = (),
    ) -> Clawbot:
        """Prepare the home folder, open and migrate the database, load the agents, wire
        the pipeline. A ``commands`` or ``tools`` registry passed in is used as given (the
        agent commands and tools are added only to the default ones)."""
        prepare_home(settings)
        # before the database opens: a tool's bad setting (web_search's key) stops the start
        registry = tools if tools is not None else default_tools(settings)
        redactor.add(*settings.secret_values())  # masked in transcripts and replies too
        workspace = Workspace(settings.workspace_dir, clock=clock)
        # the embedding model loads at its first use
        embedder = configured_embedder(settings)
        store = await open_store(settings, embedder)
        try:
            await store.check_writable()
            await store.check_intact()  # a damaged file: one clear error, not one a message
        except BaseException:
            await store.close()
            raise
        agent_registry = await AgentRegistry.open(store, settings.agents_dir)
        if agent_registry.find(settings.agent) is None:
            await store.close()
            known = ", ".join(spec.agent_id for spec in agent_registry.all())
            raise ConfigError(
                f"CLAWBOT_AGENT names an unknown agent {settings.agent!r} (known: {known})",
                hint=f"set CLAWBOT_AGENT to one of them or add agents/{settings.agent}.toml",
            )
        catalog = ModelCatalog(settings, agent_registry)
        await _check_fallbacks(catalog, store)
        switchboard = Switchboard(
            settings=settings,
            agents=agent_registry,
            catalog=catalog,
            tools=registry,
        )
        outbox = Outbox()
        clock = clock or SystemClock()
        schedules = ScheduleRunner(settings=settings, store=store, outbox=outbox, clock=clock)
        spending = SpendingActions(store, outbox)
        meter = UsageMeter(
            store.usage,
            clock=clock,
            budgets=Budgets(
                settings,
                store.usage,
                agent_registry.find,
                notify=spending.notify,
                stop_family=spending.stop_family,
            ),
        )
        if isinstance(embedder, LitellmEmbedder):
            embedder.meter = meter
        approvals = Approvals(
            settings=settings, store=store, outbox=outbox, clock=clock, note=registry.approval_note
        )
        client = client or ModelClient(
            timeout=settings.provider_timeout,
            retries=settings.provider_retries,
            backoff=settings.retry_backoff,
            health=ModelHealth(
                cooldown=settings.fallback_cooldown,
                cooldown_max=settings.fallback_cooldown_max,
                clock=clock,
            ),
        )
        client.meter = meter  # every call counted, and refused when a budget is spent
        runtime = Runtime(
            settings=settings,
            store=store,
            tools=registry,
            workspace=workspace,
            client=client,
            agents=agents or agent_registry.get,
            switchboard=switchboard,
            gate=ToolGate(store.audit, approvals),
            # features take part in a turn as plugins; the runtime names none of them
            plugins=(
                MediaIn(settings=settings, store=store, outbox=outbox, meter=meter),
                AnnounceContext(),
                MemoryRecall(store.memories),
                CoordinatorNotes(),
                ApprovalTurns(approvals),
                *([VoiceReplies(settings, outbox, meter)] if settings.tts_model else []),
                StreamingTurns(),
                FallbackNotices(client.health, outbox, max_sessions=settings.session_cache_size),
                *mcp_servers(settings, registry),
                schedules,
                *plugins,
            ),
            reach=lambda runtime, session: session_reach(
                session, runtime=runtime, sessions=store.sessions
            ),
        )
        scheduler = Scheduler(
            settings=settings, store=store, runtime=runtime, outbox=outbox, clock=clock
        )
        subagents = SubagentControl(
            settings=settings,
            store=store,
            scheduler=scheduler,
            runtime=runtime,
            agents=agent_registry,
        )
        scheduler.bind_turn_ends(subagents.announcer)
        heartbeat = Heartbeat(
            settings=settings,
            store=store,
            scheduler=scheduler,
            workspace=workspace,
            agents=agent_registry.all,
        )
        schedules.bind(scheduler, heartbeat, subagents)
        spending.subagents = subagents
        if tools is None:
            registry.add(delegate_tool(subagents.delegation))
            offered = AgentTools(
                delegation=subagents.delegation,
                agents=agent_registry,
                registry=registry,
                changed=runtime.tools_changed,
            )
            offered.sync()
            agent_registry.listeners.append(offered.sync)
        await subagents.delegation.recover()  # before anything starts the scheduler
        messenger = SubagentMessenger(
            settings=settings,
            store=store,
            agents=agent_registry,
            outbox=outbox,
            scheduler=scheduler,
        )
        if tools is None:
            for tool in [
                *session_tools(subagents),
                message_tool(messenger),
                send_file_tool(outbox),
                *memory_tools(store.memories, agent_registry.get),
                *schedules.tools(),
            ]:
                registry.add(tool)
        for plugin in plugins:
            for tool in plugin.tools():
                registry.add(tool)
        if plugins:
            runtime.tools_changed()
        if commands is None:
            commands = builtin_commands()
            register_agent_commands(commands, switchboard, runtime)
            register_queue_commands(commands, scheduler, store.sessions)
            register_approval_commands(commands, approvals)
            register_subagent_commands(commands, store, scheduler, scheduler.clock)
            register_memory_commands(commands, store.memories, agent_registry.get)
            register_voice_commands(commands, settings)
            register_schedule_commands(commands, schedules.book)
            register_usage_commands(commands, store.usage, clock)
            register_compaction_commands(
                commands, runtime.compactor, lambda session: runtime.resolve(session).model
            )
        router = Router(
            settings=settings,
            store=store,
            runtime=runtime,
            outbox=outbox,
            commands=commands,
            access=access,
            scheduler=scheduler,
        )
        switchboard.bind(router.update_session)
        try:
            await runtime.plugins.start()
        except BaseException:
            await store.close()
            raise
        return cls(
            settings,
            store,
            workspace,
            registry,
            runtime,
            router,
            outbox,
            agent_registry,
            switchboard,
            scheduler,
            subagents,
            approvals,
            schedules,
        )

    def connect(self, adapter: Adapter) -> None:
        self.outbox.connect(adapter)

    async def start(self) -> None:
        """Resume the work a previous process left (call it once adapters are connected;
        the first message starts it otherwise)."""
        await self.scheduler.start()

    async def close(self) -> None:
        """Let running turns finish or stop at a tool boundary (``shutdown_timeout``), keep
        the rest as resumable jobs, then close the database."""
        try:
            await self.scheduler.shutdown()
            await self.runtime.plugins.stop()
        finally:
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


class SpendingActions:
    """What a budget sets off in the chats (bound here: the runtime's budgets know neither
    chats nor subagents): a conversation told it nearly spent one, and the running
    subagents of a conversation whose budget is spent stopped."""

    def __init__(self, store: Store, outbox: Outbox) -> None:
        self.store = store
        self.outbox = outbox
        self.subagents: SubagentControl | None = None
        self._stopping: set[asyncio.Task[Any]] = set()

    async def notify(self, root_key: str, text: str) -> None:
        root = await self.store.sessions.get(root_key)
        if root is None:
            return
        await self.outbox.deliver(root.notice(text))

    async def stop_family(self, root_key: str) -> None:
        """Stop the conversation's running subagents, in a task of its own: the call that
        spent the budget may be one of theirs, and a turn cannot wait for its own stop."""
        root = await self.store.sessions.get(root_key)
        if root is None or self.subagents is None:
            return
        task = asyncio.ensure_future(self.subagents.stop(root, "all"))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)


class ApprovalTurns(TurnPlugin):
    """Approvals' part in a turn: a turn stopped while a call waited for a person resumes at
    that call's round, a finished round's saved copy is dropped, and the run's grants are
    revoked when it ends (security sits below the runtime, so the binding lives here)."""

    name = "approvals"

    def __init__(self, approvals: Approvals) -> None:
        self.approvals = approvals

    async def resume_round(self, turn: TurnStart) -> PausedRound | None:
        return await self.approvals.paused_round(turn.session, turn.turn_id)

    async def round_ended(self, turn: TurnStart) -> None:
        await self.approvals.round_ended(turn.turn_id)

    async def turn_ended(self, turn: TurnStart) -> None:
        await self.approvals.run_ended(turn.turn_id)

    def parked(self) -> set[asyncio.Task[Any]]:
        return self.approvals.parked()


async def _check_fallbacks(catalog: ModelCatalog, store: Store) -> None:
    """Refuse to start on a fallback list naming a model no provider knows: found at the
    first outage, the typo would leave the bot without its fallback when it needs it."""
    if not catalog.settings.fallback_models and not any(
        spec.fallback_models for spec in catalog.agents.all()
    ):
        return  # nothing to check: litellm's model list is not loaded for it
    await asyncio.to_thread(load_litellm)
    problems = catalog.fallback_problems()
    if problems:
        await store.close()
        raise ConfigError(
            ". ".join(problems),
            hint="fix the model names (/models lists the known ones), or remove them",
        )
