"""One turn of one session: resolve the agent, build the prompt, run the LLM tool loop.

The loop ends with a final answer, is bounded by ``max_tool_rounds``, and stops early when
the model keeps repeating an identical tool call. Tool failures go back to the model as
error results; provider failures (after retries) end the turn as failed with a short reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from clawbot.agents.chains import AgentChains
from clawbot.agents.profiles import AgentSpec, effective_model, fallback_chain
from clawbot.agents.skills import Skill, SkillLibrary, skills_prompt
from clawbot.agents.workspace import BootstrapFile, Workspace
from clawbot.errors import BudgetExceededError, ClawbotError, ProviderError
from clawbot.logs import agent_scope
from clawbot.messages import (
    Provenance,
    ToolCallBlock,
    ToolResultBlock,
    TranscriptEntry,
    utcnow,
)
from clawbot.routing.sessions import Session, child_id_of
from clawbot.runtime.compaction import Compactor
from clawbot.runtime.control import (
    EMPTY_REPLY,
    NEVER_YIELD,
    REPEAT_NOTE,
    REPEAT_STOP_AT,
    REPEAT_WARN_AT,
    ROUNDS_EXHAUSTED_NOTE,
    TurnControl,
    TurnResult,
    assistant_entry,
    not_run,
    repeated,
)
from clawbot.runtime.llm import UNTRUSTED_NOTE, ModelClient
from clawbot.runtime.metering import calls_for
from clawbot.runtime.plugins import TurnPlugin, TurnPlugins, TurnStart
from clawbot.runtime.resolved_turn import ResolvedTurn, within_ceiling
from clawbot.runtime.tool_offer import ToolOffer
from clawbot.runtime.transcripts import TranscriptCache
from clawbot.scheduling.jobs import TurnJob
from clawbot.security.audit import context_record
from clawbot.security.gate import ToolGate
from clawbot.security.origin import TurnOrigin
from clawbot.security.paused_rounds import ToolRound
from clawbot.security.reach import Reach
from clawbot.security.risk import AgentProfiles
from clawbot.settings import Settings
from clawbot.store import Store, new_id
from clawbot.tools.registry import Tool, ToolContext, ToolRegistry

if TYPE_CHECKING:
    from clawbot.agents.switchboard import Switchboard

_BY_AGENT = Provenance(source="agent")  # immutable, so one instance serves every entry
log = logging.getLogger("clawbot.runtime")

AgentResolver = Callable[[str], AgentSpec]
ReachOf = Callable[["Runtime", Session], Awaitable[Reach]]
"""A session's workspace reach, given the runtime's policies (bound where the bot is
assembled: a subagent's reach is within its owners', ``clawbot.subagents.ceiling``)."""
# tools, their specs, the system prompt, the files it came from and the skills it lists
_AgentParts = tuple[
    tuple[Tool, ...], tuple[dict[str, Any], ...], str, tuple[str, ...], tuple[Skill, ...]
]


class Runtime:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        tools: ToolRegistry,
        workspace: Workspace,
        client: ModelClient,
        agents: AgentResolver,
        switchboard: Switchboard | None = None,
        gate: ToolGate | None = None,
        plugins: Sequence[TurnPlugin] = (),
        reach: ReachOf | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.tools = tools
        self.gate = gate or ToolGate(store.audit)
        self.plugins = TurnPlugins(plugins)
        self._reach_of = reach or _own_reach
        self.profiles = AgentProfiles(settings.risk_profile, agents)
        self.offer = ToolOffer(tools, self.profiles)
        tools.listeners.append(self.tools_changed)  # tools that come and go (MCP servers')
        self.workspace = workspace
        self.client = client
        self.agents = agents
        self.switchboard = switchboard
        self.skills = SkillLibrary(workspace.root / "skills", clock=workspace.clock)
        self.transcripts = TranscriptCache(
            store,
            keep=max(settings.max_history_messages, 2),
            max_sessions=settings.session_cache_size,
        )
        self.chains = AgentChains(store.sessions, max_sessions=settings.session_cache_size)
        self.compactor = Compactor(
            settings=settings, store=store, client=client, transcripts=self.transcripts
        )
        # (agent id, model override) -> what the last resolve of it depended on, and got
        self._resolved: dict[
            tuple[str, str | None],
            tuple[AgentSpec, tuple[BootstrapFile, ...], int, ResolvedTurn],
        ] = {}

    def resolve(self, session: Session) -> ResolvedTurn:
        """Session -> active agent -> model, allowed tools and skills, and the prompt. Runs
        every turn, so the result is memoized on what it depends on: the agent spec, the
        model override, the bootstrap files and the skill files. The registry and the
        workspace hand out the same objects while nothing changed, so checking that they
        are the very objects of last time is enough (and cheaper than hashing them)."""
        agent = self.agents(session.agent_id)
        files = self.workspace.bootstrap(agent.agent_id, overlay=agent.workspace_overlay)
        self.skills.all()  # notices added, removed or edited SKILL.md files
        generation = self.skills.generation
        key = (agent.agent_id, session.model_override)
        memo = self._resolved.get(key)
        if memo is not None and memo[0] is agent and memo[1] is files and memo[2] == generation:
            return memo[3]
        if len(self._resolved) > 256:
            self._resolved.clear()
        model, source = effective_model(session.model_override, agent, self.settings.model)
        tools, specs, system_prompt, prompt_files, skills = self._build_parts(agent, files)
        resolved = ResolvedTurn(
            agent=agent,
            model=model,
            tools=tools,
            tool_specs=specs,
            system_prompt=system_prompt,
            history_limit=agent.context.max_history_messages or self.settings.max_history_messages,
            prompt_files=prompt_files,
            model_source=source,
            fallbacks=fallback_chain(model, agent, self.settings.fallback_models),
            skills=skills,
            tool_names=frozenset(t.name for t in tools),
        )
        self._resolved[key] = (agent, files, generation, resolved)
        return resolved

    def tools_changed(self) -> None:
        """The tool registry gained or lost a tool: resolve every agent's tools afresh."""
        self._resolved.clear()
        self.offer.changed()

    def effective_tools(self, session: Session) -> frozenset[str]:
        """The tools a session's turns may use: what a child it spawns is held within (the
        names ``within_ceiling`` gives, without resolving the turn)."""
        return self.offer.session_tools(session, self.agents(session.agent_id))

    def effective_skills(self, session: Session) -> frozenset[str]:
        """The skills a session's turns may use: what a child it spawns is held within."""
        return frozenset(s.name for s in within_ceiling(session, self.resolve(session)).skills)

    async def reach(self, session: Session) -> Reach:
        """The session's workspace reach as its chain's policies stand now (asked at each
        file tool call)."""
        return await self._reach_of(self, session)

    def agent_tools(self, agent: AgentSpec) -> frozenset[str]:
        """The tools an agent's own policy and its risk profile allow."""
        return self.offer.agent_tools(agent)

    def parked(self) -> set[asyncio.Task[Any]]:
        """The turns waiting for a person (an approval): a shutdown stops them at once."""
        return self.plugins.parked()

    def _build_parts(self, agent: AgentSpec, files: tuple[BootstrapFile, ...]) -> _AgentParts:
        tools = self.offer.offered(agent)
        skills = self.skills.for_agent(agent, {t.name for t in tools})
        sections = [f"## {f.name}\n{f.text.strip()}" for f in files]
        if agent.system_prompt:
            sections.insert(0, agent.system_prompt.strip())
        if not sections:
            sections.append(f"You are {agent.name}, a helpful assistant in a chat.")
        if skills:
            sections.append(skills_prompt(skills))
        if tools:
            sections.append(UNTRUSTED_NOTE)
        prompt_files = tuple(self.workspace.relative(f.path) for f in files)
        system_prompt = "\n\n".join(sections)
        return tools, tuple(t.spec() for t in tools), system_prompt, prompt_files, skills

    async def accept(
        self, session: Session, user_entry: TranscriptEntry, *, dedup_id: str | None = None
    ) -> str | None:
        """Persist an inbound entry with a running TurnJob, for callers that run the turn
        themselves instead of through the scheduler (benchmarks, tests of the runtime).

        Returns the turn id, or None when ``dedup_id`` (the platform message id) was seen
        before: a redelivered message is processed once.
        """
        transcript = await self.transcripts.get(session)
        turn_id = user_entry.turn_id or new_id("turn")
        user_entry = user_entry.model_copy(update={"turn_id": turn_id})
        job = TurnJob(id=turn_id, session_key=session.key, status="running", attempts=1)
        if not await self.store.jobs.submit(session, job, entry=user_entry, dedup_id=dedup_id):
            return None
        transcript.append([user_entry])
        return turn_id

    async def run_turn(
        self,
        session: Session,
        turn_id: str,
        *,
        ephemeral: Sequence[str] = (),
        control: TurnControl = NEVER_YIELD,
        inputs: Sequence[TranscriptEntry] = (),
    ) -> TurnResult:
        """Run the tool loop for an accepted turn and persist what it produced.

        ``ephemeral`` blocks (memory recall, announce payloads) are shown to the model for
        this turn only and never written to the transcript. When ``control`` asks to yield
        at a tool boundary, the turn stops there with status "yielded"; its ``entries`` are
        every round it made (already persisted), for the resume token. ``inputs`` are the
        messages the turn answers: the announces among them are rendered as ephemeral
        blocks, and tools read the hop and trace of injected ones.
        """
        resolved = within_ceiling(session, self.resolve(session))
        transcript = await self.transcripts.get(session)
        turn = TurnStart(
            session=session,
            agent=resolved.agent,
            turn_id=turn_id,
            inputs=tuple(inputs),
            tool_names=resolved.tool_names,
            transcript=transcript,
            tool_context=_memo(lambda: self._tool_context(session, resolved, turn_id, inputs)),
            model=resolved.model,
        )
        ancestors = await self.chains.ancestors(session)
        # every call the turn makes (its model's, a transcription's, an embedding's) is its
        # own in the usage ledger
        with (
            agent_scope(*ancestors, resolved.agent.agent_id),
            calls_for(session, turn_id, agent_id=resolved.agent.agent_id),
        ):
            ephemeral = (*ephemeral, *await self.plugins.context(turn))
            if ephemeral:  # the audit keeps what the model was shown; the transcript never does
                trace_id = TurnOrigin.of(session, turn_id, inputs).trace.trace_id
                await self.store.audit.started(
                    context_record(
                        trace_id=trace_id,
                        task_id=child_id_of(session.key) or trace_id,
                        run_id=turn_id,
                        session_key=session.key,
                        agent_id=resolved.agent.agent_id,
                        blocks=ephemeral,
                        at=utcnow(),
                    )
                )
            try:
                await self.plugins.turn_started(turn)
                return await self._loop(turn, resolved, ephemeral, control)
            finally:
                await self.plugins.turn_ended(turn)

    def _tool_context(
        self,
        session: Session,
        resolved: ResolvedTurn,
        turn_id: str,
        inputs: Sequence[TranscriptEntry],
    ) -> ToolContext:
        return ToolContext(
            session=session,
            workspace=self.workspace.root,
            settings=self.settings,
            agent_id=resolved.agent.agent_id,
            skills=resolved.skills,
            switchboard=self.switchboard,
            turn_id=turn_id,
            inputs=tuple(inputs),
            reach=lambda: self.reach(session),
            withheld_skills=resolved.withheld_skills,
        )

    async def _loop(
        self,
        turn: TurnStart,
        resolved: ResolvedTurn,
        ephemeral: Sequence[str],
        control: TurnControl,
    ) -> TurnResult:
        session, turn_id, transcript = turn.session, turn.turn_id, turn.transcript
        specs = resolved.tool_specs
        seen: Counter[str] = Counter()
        rounds = 0
        final_note: str | None = None
        pending: list[TranscriptEntry] = []
        made: list[TranscriptEntry] = []
        # A turn stopped while a call waited (for an approval) resumes at that call's round.
        paused = await self.plugins.resume_round(turn)
        while True:
            offer_tools = final_note is None
            resumed, paused = paused, None
            if resumed is not None:  # the round as it was saved: the model is not asked again
                reply = resumed.reply
                ran = reply.tool_calls[: len(resumed.results)]
                seen.update(c.signature for c in ran)
            else:
                try:
                    # kept within the model's window: compacted first when it nears it
                    reply = await self.plugins.call_model(
                        turn,
                        lambda note=final_note, tools=offer_tools: self.compactor.complete(  # type: ignore[misc]
                            session,
                            transcript,
                            resolved.model,
                            lambda: self._messages(
                                resolved,
                                self.plugins.history(turn, transcript.tail(resolved.history_limit)),
                                ephemeral,
                                note,
                            ),
                            specs if tools else (),
                            temperature=resolved.agent.temperature,
                            fallbacks=resolved.fallbacks,
                        ),
                    )
                except ClawbotError as exc:
                    return await self._fail(session, turn_id, rounds, pending, exc)
            entry = assistant_entry(reply, turn_id, offer_tools)
            if not offer_tools or not reply.tool_calls:
                pending.append(entry)
                await self.store.jobs.finish(session, turn_id, pending, status="done")
                transcript.append(pending)
                return TurnResult(
                    turn_id=turn_id,
                    status="done",
                    reply=reply.text.strip() or EMPTY_REPLY,
                    rounds=rounds,
                    entries=tuple(pending),
                )
            rounds += 1
            results: list[ToolResultBlock] = list(resumed.results) if resumed else []
            tool_round = ToolRound(reply, results, resumed)  # saved if a call waits
            yielding = False
            for tool_call in reply.tool_calls[len(results) :]:
                # Not-yet-started calls are a safe boundary; each still gets a result.
                if yielding or control.should_yield():
                    yielding = True
                    results.append(not_run(tool_call, control.not_run_note()))
                    continue
                signature = tool_call.signature
                seen[signature] += 1
                if seen[signature] >= REPEAT_WARN_AT:
                    log.warning(
                        "repeated identical call to %s (%d times)", tool_call.name, seen[signature]
                    )
                    results.append(repeated(tool_call))
                    continue
                log.info("tool %s", tool_call.name)
                results.append(await self._run_tool(tool_call, turn, resolved, rounds, tool_round))
            tool_entry = TranscriptEntry(
                role="tool",
                content=tuple(results),
                provenance=_BY_AGENT,
                turn_id=turn_id,
            )
            pending.extend((entry, tool_entry))
            # Tools may have written bootstrap or skill files: the next turn sees them at once.
            self.workspace.changed()
            self.skills.changed()
            # Each finished round is durable, so a crash loses at most the round in flight.
            await self.store.transcripts.append(session, pending)
            await self.plugins.round_ended(turn)
            transcript.append(pending)
            made.extend(pending)
            pending = []
            if yielding or control.should_yield():
                log.info("turn yields at a tool boundary after %d rounds", rounds)
                return TurnResult(
                    turn_id=turn_id, status="yielded", reply="", rounds=rounds, entries=tuple(made)
                )
            if max(seen.values()) >= REPEAT_STOP_AT:
                final_note = REPEAT_NOTE
            elif rounds >= self.settings.max_tool_rounds:
                log.warning("max_tool_rounds (%d) reached", self.settings.max_tool_rounds)
                final_note = ROUNDS_EXHAUSTED_NOTE

    def _messages(
        self,
        resolved: ResolvedTurn,
        history: list[dict[str, Any]],
        ephemeral: Sequence[str],
        final_note: str | None,
    ) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": resolved.system_prompt}]
        if ephemeral:
            # Placed before the history so it reads as context; never persisted.
            messages.append({"role": "system", "content": "\n\n".join(ephemeral)})
        messages.extend(history)
        if final_note:
            messages.append({"role": "system", "content": final_note})
        return messages

    async def _run_tool(
        self,
        call: ToolCallBlock,
        turn: TurnStart,
        resolved: ResolvedTurn,
        step: int,
        tool_round: ToolRound | None = None,
    ) -> ToolResultBlock:
        """One tool call through the gate (approvals, and its audit record), the plugins'
        wrappers around its execution: no plugin gets past the policy or the audit."""
        context = turn.tool_context()
        assert context.turn_id is not None
        ancestors = await self.chains.ancestors(context.session)
        chain = (*ancestors, resolved.agent.agent_id)
        profiles = self.profiles.of_chain(ancestors, resolved.agent)
        tool = self.tools.get(call.name)
        return await self.gate.run(
            call,
            risk=tool.risk if tool is not None else None,
            session=context.session,
            agent_id=resolved.agent.agent_id,
            run_id=context.turn_id,
            step=step,
            inputs=context.inputs,
            allowed=resolved.tool_names,
            chain=chain,
            profiles=profiles,
            execute=lambda: self.plugins.run_tool(
                call,
                turn,
                lambda: self.tools.execute(call, context, resolved.tool_names),
            ),
            check=lambda: self.tools.refusal(call, context, resolved.tool_names),
            tool_round=tool_round,
        )

    async def _fail(
        self,
        session: Session,
        turn_id: str,
        rounds: int,
        pending: list[TranscriptEntry],
        exc: ClawbotError,
    ) -> TurnResult:
        log.error("turn failed: %s", exc)
        await self.store.jobs.finish(session, turn_id, pending, status="failed", error=str(exc))
        transcript = await self.transcripts.get(session)
        transcript.append(pending)
        what = (
            "The model provider is unavailable"
            if isinstance(exc, ProviderError)
            else "The turn failed"
        )
        reply = (
            f"{what}: {exc.message}. {exc.hint[:1].upper()}{exc.hint[1:]}."
            if exc.hint
            else f"{what}: {exc.message}."
        )
        refused_by = exc.budget if isinstance(exc, BudgetExceededError) else None
        return TurnResult(turn_id, "failed", reply, rounds, error=str(exc), refused_by=refused_by)


async def _own_reach(runtime: Runtime, session: Session) -> Reach:
    """Without subagents bound in: a session reaches what its own agent's policy gives."""
    return Reach.of_agent(runtime.agents(session.agent_id), runtime.effective_tools(session))


def _memo(make: Callable[[], ToolContext]) -> Callable[[], ToolContext]:
    """Made at the first ask (the first tool call, or a plugin), then the same one."""
    made: list[ToolContext] = []

    def get() -> ToolContext:
        if not made:
            made.append(make())
        return made[0]

    return get
