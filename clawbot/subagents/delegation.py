"""Delegation: the synchronous form of a subagent. A delegate is a temporary child session
(internal, never delivered, owned by its parent) with a role prompt and a tool whitelist; it
runs one turn to completion and its answer becomes the parent's tool result.

Because the answer *is* the result, a delegate owes its parent no announce: its child record
says ``delegated``, and the injection that starts it writes no parent to report to (see
:meth:`~clawbot.subagents.injection.Injector.inject`), so the announce path never sees it.

Recursion is impossible, not just discouraged: a delegate is never given a delegating tool
(``delegate``, the ``sessions_*`` tools, an agent as tool), and a call from a delegate to one
is refused again here, on the call path. Delegation inherits the limits of spawning: its
depth counts against ``max_spawn_depth``, the parent's effective tools bound the child's,
and ``subagents.allow`` decides which agents may run as delegates. At most
``max_concurrent`` delegates of the bot run at once; more wait for a slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from clawbot.agents.profiles import AgentSpec
from clawbot.agents.registry import AgentRegistry
from clawbot.errors import MalformedMetaError, SubagentError
from clawbot.messages import INTERNAL_CHANNEL, Provenance
from clawbot.routing.sessions import Session, child_id_of, child_key
from clawbot.runtime.turn import Runtime
from clawbot.scheduling.records import TurnOutcome
from clawbot.scheduling.recovery import orphaned
from clawbot.scheduling.scheduler import Scheduler
from clawbot.scheduling.turns import DEADLINE_ERROR
from clawbot.settings import Settings
from clawbot.store import Store, new_id
from clawbot.subagents.injection import Injector, TurnOrigin
from clawbot.subagents.records import CHILD_META, ChildInfo, Injection
from clawbot.tools.registry import Tool

log = logging.getLogger("clawbot.subagents")

DELEGATE_TOOL = "delegate"
DELEGATION_GROUP = "group:delegation"
"""The group of every tool that runs another agent synchronously (``delegate``, agents as
tools): never given to a delegate."""
SESSIONS_GROUP = "group:sessions"
DELEGATING_NAMES = frozenset({DELEGATE_TOOL, "sessions_spawn", "sessions_send"})
LABEL_CHARS = 60
ID_PREFIX = "dlg"
ABANDONED = "abandoned: the tool call that ran this delegate was interrupted"

DelegateStatus = Literal["ok", "error", "timeout", "cancelled"]


def delegating(tool: Tool) -> bool:
    """A tool that starts or talks to another agent: never a delegate's."""
    return (
        tool.name in DELEGATING_NAMES
        or DELEGATION_GROUP in tool.groups
        or SESSIONS_GROUP in tool.groups
    )


def role_prompt(role: str) -> str:
    """The system prompt of an ad-hoc role (one that names no agent)."""
    return (
        f"You are a {role}. Complete the task you are given and answer with the result. "
        "Your answer goes back to the agent that delegated the task, not to a person, so "
        "make it complete and self-contained."
    )


@dataclass(frozen=True)
class DelegatePlan:
    """Who runs a delegated task and with what: the agent, the role prompt replacing its
    own (ad-hoc roles only), the model (an ad-hoc role runs on its parent's), and the
    tools and skills it may use."""

    role: str
    agent_id: str
    tools: tuple[str, ...]
    prompt: str | None = None
    model: str | None = None
    skills: tuple[str, ...] = ()


@dataclass(frozen=True)
class DelegateAnswer:
    """How one delegated task ended: its answer, or what went wrong."""

    role: str
    task: str
    status: DelegateStatus
    text: str
    child_key: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Delegation:
    """Runs delegates for one bot, at most ``max_concurrent`` at once."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        scheduler: Scheduler,
        runtime: Runtime,
        agents: AgentRegistry,
        injector: Injector,
    ) -> None:
        self.settings = settings
        self.store = store
        self.scheduler = scheduler
        self.runtime = runtime
        self.agents = agents
        self.injector = injector
        self._slots = asyncio.Semaphore(settings.max_concurrent)

    async def recover(self) -> list[str]:
        """Close the delegates' turns a previous process left unfinished (a crash, or a
        shutdown that deferred them), rather than resume them: the tool call waiting for
        their answer is gone, and the parent's turn, when it resumes, delegates again.
        Call it before the scheduler starts. Returns the closed jobs."""
        now = self.scheduler.clock.now()
        stale = []
        for job in await self.store.jobs.open():
            child_id = child_id_of(job.session_key) or ""
            if not child_id.startswith(f"{ID_PREFIX}_") or job.merged_into is not None:
                continue
            if job.status == "running" and not orphaned(job, now):
                continue  # another live process runs it
            if (
                self.store.owners.shared
                and not (await self.store.owners.claim(job.session_key)).mine
            ):
                continue  # several processes share the database: a live one owns it
            session = await self.store.sessions.get(job.session_key)
            if session is not None and ChildInfo.is_delegate(session):
                stale.append(job.id)
        if stale:
            log.info("closing %d delegate turn(s) a previous process left unfinished", len(stale))
            await self.store.jobs.close(stale, "cancelled", ABANDONED)
        return stale

    # planning ---------------------------------------------------------------------------

    def plan(self, parent: Session, role: str, tools: Sequence[str] | None = None) -> DelegatePlan:
        """Check that ``parent`` may delegate to ``role`` and choose who runs it and with
        which tools; a SubagentError says what was refused."""
        role = " ".join(role.split())
        if not role:
            raise SubagentError("the role is empty", hint="name the specialist, e.g. 'researcher'")
        parent_agent = self.agents.get(parent.agent_id)
        spec = self.agents.exact(role)
        if spec is not None:
            return self.plan_agent(parent, spec, tools, role=role)
        within = self.available(parent)
        chosen = self._whitelist(within, within, tools, role)
        return DelegatePlan(
            role=role,
            agent_id=parent_agent.agent_id,
            tools=chosen,
            prompt=role_prompt(role),
            model=self.runtime.resolve(parent).model,
            skills=self._skills(parent, parent_agent, chosen),
        )

    def plan_agent(
        self,
        parent: Session,
        spec: AgentSpec,
        tools: Sequence[str] | None = None,
        *,
        role: str | None = None,
    ) -> DelegatePlan:
        """A delegate run by the agent ``spec`` (a preset role, or an agent as tool)."""
        self.refuse_nested(parent)
        parent_agent = self.agents.get(parent.agent_id)
        if not parent_agent.may_spawn(spec.agent_id):
            allowed = parent_agent.subagents.allow
            may = ", ".join(allowed) if allowed else parent_agent.agent_id
            raise SubagentError(
                f"agent {parent_agent.agent_id} may not delegate to agent {spec.agent_id}",
                hint=f"it may run: {may or 'no agent'} (subagents.allow in its profile)",
            )
        within = self.available(parent)
        own = self.runtime.agent_tools(spec)
        chosen = self._whitelist(within, own, tools, role or spec.agent_id)
        return DelegatePlan(
            role=role or spec.name,
            agent_id=spec.agent_id,
            tools=chosen,
            skills=self._skills(parent, spec, chosen),
        )

    def refuse_nested(self, parent: Session) -> None:
        """A delegate cannot delegate: refused on the call path, whatever tools it holds."""
        try:
            info = ChildInfo.of(parent)
        except MalformedMetaError as exc:
            raise SubagentError(f"this session cannot delegate: {exc.message}") from None
        if info is not None and info.delegated:
            raise SubagentError(
                "a delegate cannot delegate or spawn",
                hint="do the task yourself and answer with what you have",
            )

    def available(self, parent: Session) -> frozenset[str]:
        """The tools a delegate of ``parent`` may hold at most: the parent's effective
        tools, less every delegating one."""
        self.refuse_nested(parent)
        names = set()
        for name in self.runtime.effective_tools(parent):
            tool = self.runtime.tools.get(name)
            if tool is not None and not delegating(tool):
                names.add(name)
        return frozenset(names)

    def _skills(self, parent: Session, spec: AgentSpec, tools: Sequence[str]) -> tuple[str, ...]:
        """The skills a delegate run by ``spec`` with ``tools`` may use: its agent's, within
        the parent's effective skills."""
        within = self.runtime.effective_skills(parent)
        held = self.runtime.skills.for_agent(spec, tools)
        return tuple(sorted(s.name for s in held if s.name in within))

    def _whitelist(
        self,
        within: frozenset[str],
        own: frozenset[str],
        tools: Sequence[str] | None,
        role: str,
    ) -> tuple[str, ...]:
        if tools is None:
            return tuple(sorted(own & within))
        wanted = {name.strip() for name in tools if name.strip()}
        unknown = sorted(name for name in wanted if self.runtime.tools.get(name) is None)
        if unknown:
            raise SubagentError(
                f"there is no tool {', '.join(unknown)}",
                hint="name tools you have yourself, or leave tools out",
            )
        refused = sorted(wanted - (own & within))
        if refused:
            held = ", ".join(sorted(own & within)) or "none"
            raise SubagentError(
                f"the {role} delegate cannot be given {', '.join(refused)}: a delegate gets "
                "only tools you have yourself (never a delegating one) that its agent allows",
                hint=f"it may have: {held}",
            )
        return tuple(sorted(wanted))

    # running ----------------------------------------------------------------------------

    async def run(
        self, parent: Session, origin: TurnOrigin, plan: DelegatePlan, task: str
    ) -> DelegateAnswer:
        """Run one delegate to completion (waiting for a slot first)."""
        if not task.strip():
            raise SubagentError("the task is empty", hint="say what the delegate should do")
        depth = ChildInfo.depth_of(parent) + 1
        if depth > self.settings.max_spawn_depth:
            raise SubagentError(
                f"spawn depth limit reached: a delegate here would be at depth {depth}, "
                f"and max_spawn_depth is {self.settings.max_spawn_depth}",
                hint="do the work yourself",
            )
        async with self._slots:
            return await self._run(parent, origin, plan, task, depth)

    async def run_all(
        self, parent: Session, origin: TurnOrigin, plan: DelegatePlan, tasks: Sequence[str]
    ) -> list[DelegateAnswer]:
        """Run independent tasks in parallel (at most ``max_concurrent`` at once); the
        answers in the order of the tasks. One failing leaves the others running."""
        if not tasks:
            raise SubagentError("the list of tasks is empty")
        results = await asyncio.gather(
            *(self.run(parent, origin, plan, task) for task in tasks), return_exceptions=True
        )
        answers = []
        for task, result in zip(tasks, results, strict=True):
            if isinstance(result, SubagentError):
                answers.append(DelegateAnswer(plan.role, task, "error", str(result), ""))
            elif isinstance(result, BaseException):
                raise result
            else:
                answers.append(result)
        return answers

    async def _run(
        self, parent: Session, origin: TurnOrigin, plan: DelegatePlan, task: str, depth: int
    ) -> DelegateAnswer:
        child_id = new_id(ID_PREFIX)
        key = child_key(parent.key, child_id)
        info = ChildInfo(
            child_id=child_id,
            parent_key=parent.key,
            label=f"{plan.role}: {task.strip().splitlines()[0]}"[:LABEL_CHARS],
            task=task,
            depth=depth,
            timeout=self.settings.subagent_timeout,
            tools=plan.tools,
            skills=plan.skills,
            delegated=True,
            prompt=plan.prompt,
        )
        hop, trace = origin.onward(key, plan.agent_id)
        injection = Injection(
            kind="task",
            target_key=key,
            source_key=parent.key,
            text=task,
            provenance=Provenance(
                channel=INTERNAL_CHANNEL,
                sender_id=parent.key,
                sender_name=self.agents.get(parent.agent_id).name,
                message_id=f"task:{key}",
                source="internal",
            ),
            idempotency_key=f"task:{key}",
            hop=hop,
            trace=trace,
        )
        self.injector.check(injection)  # before the child exists: a refusal leaves nothing
        child = await self.store.sessions.create(
            Session(
                key=key,
                channel=INTERNAL_CHANNEL,
                chat_id=child_id,
                agent_id=plan.agent_id,
                model_override=plan.model,
                deliver=False,
                owner_key=parent.key,
                meta={CHILD_META: info.model_dump(mode="json")},
            )
        )
        handle = await self.injector.inject(injection)
        if handle is None:  # a fresh key is never stored before
            raise SubagentError(f"the delegate {key} could not be started")
        log.info("delegate %s (%s) started for %s", key, plan.role, parent.key)
        try:
            outcome = await handle.outcome()
        except asyncio.CancelledError:
            # The parent's turn was stopped or is shutting down: the delegate goes with it.
            await self.scheduler.stop(child.key, with_parent=True)
            raise
        return await self._answer(plan, task, child, outcome)

    async def _answer(
        self, plan: DelegatePlan, task: str, child: Session, outcome: TurnOutcome
    ) -> DelegateAnswer:
        def answer(status: DelegateStatus, text: str) -> DelegateAnswer:
            return DelegateAnswer(plan.role, task, status, text, child.key)

        result = outcome.result
        if outcome.status == "done" and result is not None and result.status == "done":
            return answer("ok", result.reply)
        if outcome.status == "cancelled":
            return answer("cancelled", f"the {plan.role} delegate was stopped")
        if outcome.status == "deferred":
            return answer(
                "cancelled", f"the {plan.role} delegate was interrupted: clawbot is shutting down"
            )
        summary = await self.store.jobs.get(outcome.job_id)
        error = (result.error if result is not None else None) or (
            summary.error if summary is not None else None
        )
        if error is not None and error.startswith(DEADLINE_ERROR):
            return answer(
                "timeout",
                f"the {plan.role} delegate timed out after "
                f"{self.settings.subagent_timeout:g} s and was stopped",
            )
        return answer("error", f"the {plan.role} delegate failed: {error or 'unknown error'}")
