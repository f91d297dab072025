"""The heartbeat: an agent's ``HEARTBEAT.md`` checklist (its overlay's, else the
workspace's) run every ``heartbeat_interval`` seconds in the chat a person last wrote to
with that agent, in the ``cron`` lane. The agent speaks only when something needs
attention: a reply of exactly ``HEARTBEAT_OK`` sends nothing. Without unchecked items
(``- [ ]``) there is nothing to check, and no model is called.

Runs are slotted on the interval (``slot = time // interval``); a slot's run is claimed by
the dedup key ``heartbeat:<agent>:<slot>`` written with its job, so a restart in the same
slot does not run it again."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from clawbot.agents.profiles import AgentSpec
from clawbot.agents.workspace import Workspace
from clawbot.messages import Provenance, TextBlock, TranscriptEntry
from clawbot.scheduling.jobs import QUIET_REPLY
from clawbot.scheduling.scheduler import Scheduler
from clawbot.settings import Settings
from clawbot.store import Store

log = logging.getLogger("clawbot.schedules")

HEARTBEAT_FILE = "HEARTBEAT.md"
HEARTBEAT_META = "heartbeat"
_UNCHECKED = re.compile(r"^\s*[-*+]\s+\[ \]\s+(\S.*)$")


def unchecked_items(checklist: str) -> list[str]:
    """The items of a Markdown checklist not yet ticked (``- [ ] water the plants``)."""
    return [m.group(1).strip() for line in checklist.splitlines() if (m := _UNCHECKED.match(line))]


def heartbeat_prompt(items: Sequence[str]) -> str:
    listed = "\n".join(f"- [ ] {item}" for item in items)
    return (
        f"[Heartbeat]\nGo through this checklist now. If nothing needs the person's "
        f"attention, reply with exactly {QUIET_REPLY} and nothing else; otherwise tell them, "
        f"briefly, what needs attention.\n\n{listed}"
    )


class Heartbeat:
    """Runs the checklists of the agents whose interval is due."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        scheduler: Scheduler,
        workspace: Workspace,
        agents: Callable[[], Sequence[AgentSpec]],
    ) -> None:
        self.settings = settings
        self.store = store
        self.scheduler = scheduler
        self.workspace = workspace
        self.agents = agents
        self._done: dict[str, int] = {}  # agent id -> the last slot looked at

    def interval(self, agent: AgentSpec) -> float:
        every = agent.heartbeat_interval
        return self.settings.heartbeat_interval if every is None else every

    def next_due(self, now: datetime) -> datetime | None:
        """The start of the soonest slot not yet looked at."""
        starts = []
        for agent in self.agents():
            every = self.interval(agent)
            if every > 0:
                slot = _slot(now, every)
                ahead = slot + 1 if self._done.get(agent.agent_id) == slot else slot
                starts.append(datetime.fromtimestamp(ahead * every, UTC))
        return min(starts, default=None)

    async def tick(self, now: datetime) -> int:
        """Start each agent's run of the current slot, once; how many were started."""
        started = 0
        for agent in self.agents():
            every = self.interval(agent)
            if every <= 0:
                continue
            slot = _slot(now, every)
            if self._done.get(agent.agent_id) == slot:
                continue
            self._done[agent.agent_id] = slot
            started += await self._run(agent, slot)
        return started

    async def _run(self, agent: AgentSpec, slot: int) -> int:
        text = self.workspace.read(
            HEARTBEAT_FILE, agent.agent_id if agent.workspace_overlay else None
        )
        items = unchecked_items(text or "")
        if not items:
            return 0  # nothing to check: no model call
        key = await self.store.schedules.heartbeat_target(agent.agent_id)
        session = await self.store.sessions.get(key) if key is not None else None
        if session is None:
            log.info("heartbeat of %s: no chat to run it in yet", agent.agent_id)
            return 0
        entry = TranscriptEntry(
            role="user",
            content=(TextBlock(text=heartbeat_prompt(items)),),
            provenance=Provenance(channel=session.channel, source="system"),
            meta={HEARTBEAT_META: agent.agent_id},
        )
        handle = await self.scheduler.submit(
            session, entry, lane="cron", dedup_id=f"heartbeat:{agent.agent_id}:{slot}"
        )
        return 1 if handle is not None else 0


def _slot(now: datetime, every: float) -> int:
    return math.floor(now.timestamp() / every)
