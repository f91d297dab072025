"""Budgets that stop spending: a model call is refused BEFORE it is made once a budget that
covers it is spent, with one message naming the budget and how to raise it.

The budgets (``clawbot.settings.cost``): the bot's daily cap (``CLAWBOT_DAILY_BUDGET_USD``),
each conversation's per UTC day, in all and per turn (its subagents roll up to it), and each
agent's own (``[budget]`` in its TOML file: per day across its sessions, per session, per
turn). What each has spent is a tally kept in memory, read once from the usage ledger when
a budget first needs it (a restart loses nothing) and added to as calls are recorded, so a
check costs dictionary lookups, not a query. A turn's tally starts at nothing.

At 80 % of a budget the conversation whose call crossed it is told once; at 100 % the
operator is told in the log, the running subagents of that conversation are stopped, and
every further call it covers is refused. Without budgets configured a call pays for none of
this.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple

from clawbot.agents.profiles import AgentSpec
from clawbot.errors import BudgetExceededError
from clawbot.lru import LRUCache
from clawbot.runtime.usage import NANOS_PER_USD, UsageFilter, UsageRecord
from clawbot.settings import Settings
from clawbot.settings.cost import Budget
from clawbot.store.protocols.usage import UsageLedger

log = logging.getLogger("clawbot.budgets")

WARN_AT = 0.8
"""The share of a budget at which the conversation is told it is nearly spent."""
TallyKey = tuple[str, ...]
Notify = Callable[[str, str], Awaitable[None]]
"""Tell a conversation (its root session key) something."""
StopFamily = Callable[[str], Awaitable[None]]
"""Stop the running subagents of a conversation (its root session key)."""
AgentLookup = Callable[[str], AgentSpec | None]


class Who(NamedTuple):
    """Whom a call is made for: what decides which budgets cover it. (A named tuple: one
    is made for every call, and its budgets are memoized by it.)"""

    day: str
    session_key: str | None = None
    agent_id: str | None = None
    root_key: str | None = None
    turn_id: str | None = None

    @classmethod
    def of(cls, record: UsageRecord) -> Who:
        return cls(record.day, record.session_key, record.agent_id, record.root_key, record.turn_id)


@dataclass(frozen=True)
class BudgetLine:
    """One budget that covers a call: what it is called, where it is set, its limit, the
    tally of what it covers, and how that tally is read from the ledger (None: from
    nothing, a turn's)."""

    name: str
    setting: str
    budget: Budget
    key: TallyKey
    where: UsageFilter | None
    daily: bool = False
    family: bool = True
    """It covers a whole conversation: once spent, that conversation's subagents stop."""


@dataclass
class Spent:
    tokens: int = 0
    nanousd: int = 0

    def share_of(self, budget: Budget) -> float:
        if budget.unit == "tokens":
            return self.tokens / budget.amount
        return self.nanousd / (budget.amount * NANOS_PER_USD)

    def describe(self, budget: Budget) -> str:
        if budget.unit == "tokens":
            return f"{self.tokens:,} tokens"
        return f"${self.nanousd / NANOS_PER_USD:,.2f}"


class Budgets:
    """Checks calls against the budgets that cover them and keeps what each has spent."""

    def __init__(
        self,
        settings: Settings,
        ledger: UsageLedger,
        agents: AgentLookup,
        *,
        notify: Notify | None = None,
        stop_family: StopFamily | None = None,
        max_tallies: int = 10_000,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.agents = agents
        self.notify = notify
        self.stop_family = stop_family
        self._tallies: LRUCache[TallyKey, Spent] = LRUCache(max_tallies)
        self._told: LRUCache[tuple[TallyKey, str], bool] = LRUCache(max_tallies)
        self._global = (
            Budget(amount=settings.daily_budget_usd) if settings.daily_budget_usd else None
        )
        self._lines: LRUCache[Who, tuple[AgentSpec | None, list[BudgetLine]]] = LRUCache(1024)
        self._any_settings = any(
            (
                self._global,
                settings.budget_per_day,
                settings.budget_per_session,
                settings.budget_per_turn,
            )
        )

    def lines(self, who: Who) -> list[BudgetLine]:
        """The budgets that cover a call made for ``who`` (memoized while its agent's spec
        stays the same: a turn's calls ask again and again)."""
        spec = self.agents(who.agent_id) if who.agent_id is not None else None
        cached = self._lines.get(who)
        if cached is not None and cached[0] is spec:
            return cached[1]
        found = self._lines_of(who, spec)
        self._lines.put(who, (spec, found))
        return found

    def _lines_of(self, who: Who, spec: AgentSpec | None) -> list[BudgetLine]:
        settings = self.settings
        found: list[BudgetLine] = []
        if self._global:
            found.append(
                BudgetLine(
                    "the bot's daily budget",
                    "CLAWBOT_DAILY_BUDGET_USD",
                    self._global,
                    ("day", who.day),
                    UsageFilter(day=who.day),
                    daily=True,
                )
            )
        root = who.root_key
        if root is not None:
            if settings.budget_per_day:
                found.append(
                    BudgetLine(
                        "this conversation's daily budget",
                        "CLAWBOT_BUDGET_PER_DAY",
                        settings.budget_per_day,
                        ("root-day", root, who.day),
                        UsageFilter(root_key=root, day=who.day),
                        daily=True,
                    )
                )
            if settings.budget_per_session:
                found.append(
                    BudgetLine(
                        "this conversation's budget",
                        "CLAWBOT_BUDGET_PER_SESSION",
                        settings.budget_per_session,
                        ("root", root),
                        UsageFilter(root_key=root),
                    )
                )
        if who.turn_id is not None and settings.budget_per_turn:
            found.append(
                BudgetLine(
                    "the budget of one turn",
                    "CLAWBOT_BUDGET_PER_TURN",
                    settings.budget_per_turn,
                    ("turn", who.turn_id),
                    None,
                    family=False,
                )
            )
        if spec is not None:
            found.extend(self._agent_lines(who, spec))
        return found

    def _agent_lines(self, who: Who, spec: AgentSpec) -> list[BudgetLine]:
        agent_id = spec.agent_id
        policy = spec.budget
        where = f"[budget] of agents/{agent_id}.toml"
        found: list[BudgetLine] = []
        if policy.per_day:
            found.append(
                BudgetLine(
                    f"agent {agent_id}'s daily budget",
                    f"per_day in {where}",
                    policy.per_day,
                    ("agent-day", agent_id, who.day),
                    UsageFilter(agent_id=agent_id, day=who.day),
                    daily=True,
                    family=False,
                )
            )
        if policy.per_session and who.session_key is not None:
            found.append(
                BudgetLine(
                    f"agent {agent_id}'s budget for one session",
                    f"per_session in {where}",
                    policy.per_session,
                    ("session", who.session_key),
                    UsageFilter(session_key=who.session_key),
                    family=False,
                )
            )
        if policy.per_turn and who.turn_id is not None:
            found.append(
                BudgetLine(
                    f"agent {agent_id}'s budget for one turn",
                    f"per_turn in {where}",
                    policy.per_turn,
                    ("turn", who.turn_id),
                    None,
                    family=False,
                )
            )
        return found

    def _covered(self, who: Who) -> list[BudgetLine]:
        """:meth:`lines`, skipped at once when neither the settings nor the agent set one."""
        if not self._any_settings:
            spec = self.agents(who.agent_id) if who.agent_id is not None else None
            policy = spec.budget if spec is not None else None
            if policy is None or not (policy.per_day or policy.per_session or policy.per_turn):
                return []
        return self.lines(who)

    async def allow(self, who: Who) -> None:
        """Refuse (BudgetExceededError) a call a spent budget covers, before it is made."""
        for line in self._covered(who):
            spent = await self._spent(line)
            if spent.share_of(line.budget) >= 1:
                self._log_reached(line, spent)
                raise refusal(line, spent)

    async def spent(self, record: UsageRecord) -> None:
        """Count a recorded call in the tallies of the budgets that cover it; tell the
        conversation at 80 %, the operator (and stop the family) at 100 %."""
        who = Who.of(record)
        for line in self._covered(who):
            tally = self._tallies.get(line.key)
            if tally is None:
                tally = await self._spent(line)  # the read writes this call's row first
            else:
                tally.tokens += record.tokens
                tally.nanousd += record.cost_nanousd or 0
            share = tally.share_of(line.budget)
            if share >= 1:
                self._log_reached(line, tally)
                stops = line.family and who.root_key and self.stop_family is not None
                if stops and self._first(line.key, "stop"):
                    assert self.stop_family is not None and who.root_key is not None
                    await self.stop_family(who.root_key)
            elif share >= WARN_AT and who.root_key and self._first(line.key, "warn"):
                log.warning(
                    "%s (%s) is at %d %%: %s of %s",
                    line.name,
                    line.setting,
                    share * 100,
                    tally.describe(line.budget),
                    line.budget.describe(),
                )
                if self.notify is not None:
                    await self.notify(who.root_key, warning(line, tally))

    async def _spent(self, line: BudgetLine) -> Spent:
        tally = self._tallies.get(line.key)
        if tally is None:
            tally = Spent()
            if line.where is not None:
                totals = await self.ledger.totals(line.where)
                tally = Spent(tokens=totals.tokens, nanousd=totals.cost_nanousd)
            self._tallies.put(line.key, tally)
        return tally

    def _first(self, key: TallyKey, what: str) -> bool:
        if self._told.get((key, what)):
            return False
        self._told.put((key, what), True)
        return True

    def _log_reached(self, line: BudgetLine, spent: Spent) -> None:
        if self._first(line.key, "log"):
            log.warning(
                "%s (%s) is spent: %s of %s; model calls it covers are refused",
                line.name,
                line.setting,
                spent.describe(line.budget),
                line.budget.describe(),
            )


def refusal(line: BudgetLine, spent: Spent) -> BudgetExceededError:
    """The one message a refused call gets: which budget, what it allows, how to raise it."""
    wait = " or wait for the next day (UTC)" if line.daily else ""
    return BudgetExceededError(
        f"{line.name} is spent ({spent.describe(line.budget)} of {line.budget.describe()}),"
        " so no model was called",
        hint=f"to go on, raise {line.setting} and restart{wait}; commands still work",
        budget=":".join(line.key),
    )


def warning(line: BudgetLine, spent: Spent) -> str:
    """What a conversation is told once when a budget covering it is 80 % spent."""
    wait = ", or wait for the next day (UTC)" if line.daily else ""
    return (
        f"Heads up: {line.name} is {spent.share_of(line.budget):.0%} spent"
        f" ({spent.describe(line.budget)} of {line.budget.describe()}). When it is all"
        f" spent, model calls stop until {line.setting} is raised{wait}."
    )
