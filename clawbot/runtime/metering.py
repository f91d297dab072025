"""Every call counted: each call to a paid model writes a row of the usage ledger, and the
budgets that cover a model call are checked before it is made.

Whom a call is for travels with the code that makes it, as a context variable: a turn binds
its session, agent and turn around all it does (:func:`calls_for`), a compaction renames
the purpose of the calls it makes (:func:`calls_as`), and a call made outside any turn (a
voice note read aloud after the reply, ``/compact``) names its session itself. The call
sites (the model client, the embedder, transcription, speech) only hand the
:class:`UsageMeter` what the provider answered.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from clawbot.clock import Clock
from clawbot.logs import current_agent
from clawbot.providers import litellm_module
from clawbot.routing.sessions import Session, parent_key_of
from clawbot.runtime.budgets import Budgets, Who
from clawbot.runtime.replies import ModelReply
from clawbot.runtime.usage import CACHED_TOKENS, OK, Purpose, UsageRecord, to_nanos
from clawbot.store.protocols.usage import UsageLedger

log = logging.getLogger("clawbot.usage")

_NO_AGENT = "system"  # what the log scope says outside any agent's turn


@dataclass(frozen=True)
class CallScope:
    """Whom the calls made now are for: the session, its agent, the root conversation it
    rolls up to, the turn, and why."""

    session_key: str
    agent_id: str
    root_key: str
    turn_id: str | None
    purpose: Purpose


_scope: ContextVar[CallScope | None] = ContextVar("clawbot_call_scope", default=None)


def root_key_of(session: Session) -> str:
    """The conversation a session rolls up to: a person's session is its own root; a
    subagent's key names its parent's (``internal:<parent>/<child>``), up to the root."""
    if session.owner_key is None:
        return session.key
    key = session.key
    while (parent := parent_key_of(key)) is not None:
        key = parent
    return key if key != session.key else session.owner_key


def scope_of(
    session: Session, turn_id: str | None = None, purpose: Purpose | None = None
) -> CallScope:
    return CallScope(
        session_key=session.key,
        agent_id=session.agent_id,
        root_key=root_key_of(session),
        turn_id=turn_id,
        purpose=purpose or ("subagent" if session.owner_key else "turn"),
    )


def current_scope() -> CallScope | None:
    return _scope.get()


@contextlib.contextmanager
def calls_for(
    session: Session, turn_id: str | None = None, *, agent_id: str | None = None
) -> Iterator[None]:
    """Calls made inside the block are ``session``'s (its turn ``turn_id``, made by
    ``agent_id`` when it is not the session's own)."""
    scope = scope_of(session, turn_id)
    if agent_id is not None and agent_id != scope.agent_id:
        scope = replace(scope, agent_id=agent_id)
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)


@contextlib.contextmanager
def calls_as(purpose: Purpose, session: Session | None = None) -> Iterator[None]:
    """Calls made inside the block are made for ``purpose`` (a compaction's summary), for
    the turn running now or, outside any, for ``session``."""
    scope = _scope.get()
    if scope is None:
        if session is None:
            yield
            return
        scope = scope_of(session, purpose=purpose)
    token = _scope.set(replace(scope, purpose=purpose))
    try:
        yield
    finally:
        _scope.reset(token)


@functools.cache
def provider_of(model: str) -> str:
    """The provider litellm routes a model to: the prefix of the model string
    (``openai/gpt-4o`` -> ``openai``), or litellm's guess for a bare name (``gpt-4o``)."""
    head, slash, _ = model.partition("/")
    if slash:
        return head
    try:
        return str(litellm_module().get_llm_provider(model)[1])
    except Exception:  # litellm raises a bare exception for a model it cannot route
        return "unknown"


def count(value: Any) -> int | None:
    """A token count from a provider: a whole number of at least 0, else unknown (None);
    a malformed usage is logged, never trusted and never fatal."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


def response_cost(response: Any) -> float | None:
    """What litellm priced a call's response at (from its bundled price list, offline), or
    the provider reported; None when unknown."""
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        return None
    return float(cost) if math.isfinite(cost) and cost >= 0 else None


class UsageMeter:
    """Writes the ledger's rows and asks the budgets before each model call."""

    def __init__(
        self, ledger: UsageLedger, *, clock: Clock, budgets: Budgets | None = None
    ) -> None:
        self.ledger = ledger
        self.clock = clock
        self.budgets = budgets

    @staticmethod
    def started() -> float:
        """A call's start, for its latency."""
        return time.perf_counter()

    async def allow(self, session: Session | None = None) -> None:
        """Refuse the model call about to be made, before it is, when a spent budget
        covers it (BudgetExceededError)."""
        if self.budgets is None:
            return
        scope = _scope.get() or (scope_of(session) if session is not None else None)
        day = self.clock.now().date().isoformat()
        if scope is None:
            await self.budgets.allow(Who(day))
        else:
            who = Who(day, scope.session_key, scope.agent_id, scope.root_key, scope.turn_id)
            await self.budgets.allow(who)

    async def model_answered(self, model: str, started: float, reply: ModelReply) -> None:
        usage = reply.usage
        await self.record(
            purpose="turn",
            model=model,
            started=started,
            input_tokens=usage.get("prompt_tokens") if usage else None,
            cached_tokens=usage.get(CACHED_TOKENS) if usage else None,
            output_tokens=usage.get("completion_tokens") if usage else None,
            cost_usd=reply.cost_usd,
        )

    async def failed(
        self,
        purpose: Purpose,
        model: str,
        started: float,
        exc: BaseException,
        *,
        session: Session | None = None,
    ) -> None:
        """A call that got no answer: its row says how it failed; tokens and cost unknown."""
        await self.record(
            purpose=purpose,
            model=model,
            started=started,
            outcome=type(exc).__name__,
            session=session,
        )

    async def record(
        self,
        *,
        purpose: Purpose,
        model: str,
        started: float,
        outcome: str = OK,
        input_tokens: int | None = None,
        cached_tokens: int | None = None,
        output_tokens: int | None = None,
        cost_usd: float | None = None,
        provider: str | None = None,
        session: Session | None = None,
    ) -> None:
        """Write one call's row: the scope bound now (or ``session``'s) says for whom, and
        ``purpose`` says why unless the scope already does (a turn's model calls say
        ``turn`` or ``subagent``; a compaction's, ``compaction``). The row rides on the
        store's next commit: nothing waits for it (one that cannot be written is logged)."""
        scope = _scope.get()
        if scope is None and session is not None:
            scope = scope_of(session)
        if scope is not None and purpose == "turn":
            purpose = scope.purpose
        chain = current_agent.get()
        record = UsageRecord(
            at=self.clock.now(),
            purpose=purpose,
            model=model,
            provider=provider or provider_of(model),
            latency_ms=(time.perf_counter() - started) * 1000,
            outcome=outcome,
            session_key=scope.session_key if scope else None,
            agent_id=scope.agent_id if scope else None,
            chain=chain if chain != _NO_AGENT else None,
            root_key=scope.root_key if scope else None,
            turn_id=scope.turn_id if scope else None,
            input_tokens=count(input_tokens),
            cached_tokens=count(cached_tokens),
            output_tokens=count(output_tokens),
            cost_nanousd=to_nanos(cost_usd),
        )
        self.ledger.record(record)
        if self.budgets is not None:
            await self.budgets.spent(record)
