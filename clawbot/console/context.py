"""What every page of the console reads and changes: the bot's store, its agents, its
approvals (when the console runs inside the serving process), the log tail and the clock."""

from __future__ import annotations

from dataclasses import dataclass, field

from clawbot.agents.registry import AgentRegistry
from clawbot.clock import Clock, SystemClock
from clawbot.console.logtail import LogTail
from clawbot.security.approvals import Approvals
from clawbot.settings import Settings
from clawbot.store import Store


@dataclass(frozen=True)
class ConsoleContext:
    """``approvals`` is None for a console that runs beside the serving process (``clawbot
    console``): a turn waits for its answer in that process, so it is answered there (in
    the chat, or in ``clawbot run --console``). ``poll_seconds``: how often a live page
    (a subagent tree) reads the store again."""

    settings: Settings
    store: Store
    agents: AgentRegistry
    approvals: Approvals | None
    logs: LogTail
    clock: Clock = field(default_factory=SystemClock)
    poll_seconds: float = 1.0
