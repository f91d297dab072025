"""The subagent ``message`` tool: a subagent writing to the person directly, in the chat of
its root session (the first session up its owner chain that is not internal), prefixed
``[Role]:`` with its agent's name.

Only where its agent's profile allows it (``subagents.message``), and only within its
parent's reach: a child of a person's conversation may get the tool, a grandchild only when
its parent holds it. Without it the tool is neither offered nor executable, and nothing an
internal session does reaches a platform. With it, the text goes out through
:meth:`~clawbot.channels.outbox.Outbox.deliver_on_behalf`, the outbox's one path for this.
"""

from __future__ import annotations

import logging
from typing import Annotated

from pydantic import Field

from clawbot.agents.chains import owners
from clawbot.agents.profiles import MESSAGE_GROUP, AgentSpec
from clawbot.agents.registry import AgentRegistry
from clawbot.channels.outbox import Outbox
from clawbot.errors import SubagentError
from clawbot.lru import LRUCache
from clawbot.messages import INTERNAL_CHANNEL, Provenance, TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.scheduler import Scheduler
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.tools.registry import Tool, ToolContext, make_tool

log = logging.getLogger("clawbot.subagents")

MESSAGE_TOOL = "message"
MESSAGES_PER_TURN = 3
"""A subagent writes to the person at most this often per turn: the rest goes in its report."""
REFUSAL = (
    "only a subagent whose agent profile sets subagents.message may write to the person; "
    "report back to your parent instead"
)


def reach_of(parent: Session) -> frozenset[str]:
    """What a child's tool ceiling holds beyond its parent's tools: a person's conversation
    (a session nobody owns) reaches its person, so its children may be given ``message``;
    a subagent's children only when it holds ``message`` itself (then it is in its tools)."""
    return frozenset({MESSAGE_TOOL}) if parent.owner_key is None else frozenset()


class SubagentMessenger:
    """Posts a permitted subagent's text to its root session's chat."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        agents: AgentRegistry,
        outbox: Outbox,
        scheduler: Scheduler,
    ) -> None:
        self.settings = settings
        self.store = store
        self.agents = agents
        self.outbox = outbox
        self.scheduler = scheduler
        self._posted: LRUCache[str, int] = LRUCache(1024)  # turn id -> messages posted

    async def root(self, session: Session) -> Session:
        """The first session up ``session``'s owner chain that is not internal."""
        for owner in await owners(self.store.sessions, session):
            if owner.channel != INTERNAL_CHANNEL:
                return owner
        raise SubagentError(
            "there is no person's conversation above this session",
            hint="report back to your parent instead",
        )

    async def post(self, session: Session, text: str, turn_id: str | None = None) -> int:
        """Deliver ``text`` from subagent ``session`` (in its turn ``turn_id``) to its root's
        chat; the number of platform messages it took. A SubagentError says why it was
        refused."""
        agent = self.agents.get(session.agent_id)
        if session.owner_key is None or session.channel != INTERNAL_CHANNEL:
            raise SubagentError(
                "message is for subagents; this conversation's replies reach the person already",
                hint="answer in your reply",
            )
        if not agent.subagents.message:
            log.warning("refused a message to the person from %s (%s)", session.key, agent.label)
            raise SubagentError(
                f"agent {agent.agent_id} may not message the person: subagents.message is "
                "off in its profile",
                hint="report back to your parent instead; it decides what the person sees",
            )
        text = text.strip()
        if not text:
            raise SubagentError("the message is empty", hint="say what the person should read")
        limit = self.settings.max_message_chars
        if len(text) > limit:
            raise SubagentError(
                f"the message has {len(text)} characters, more than max_message_chars ({limit})",
                hint="shorten it, or report the details to your parent",
            )
        turn = turn_id or session.key
        posted = self._posted.get(turn) or 0
        if posted >= MESSAGES_PER_TURN:
            raise SubagentError(
                f"you wrote to the person {posted} times this turn, the limit is "
                f"{MESSAGES_PER_TURN}",
                hint="put the rest in your answer; it goes to your parent",
            )
        root = await self.root(session)
        self._posted.put(turn, posted + 1)  # taken before the await: calls of one round race
        delivery = await self.outbox.deliver_on_behalf(root, text, role=agent.name)
        if delivery.status != "sent" or not delivery.parts:
            # Only what reached the person counts against the limit.
            self._posted.put(turn, max(0, (self._posted.get(turn) or 1) - 1))
        if delivery.status == "withheld":
            raise SubagentError(
                f"the conversation {root.key} does not deliver messages",
                hint="report back to your parent instead",
            )
        if delivery.status == "failed":
            raise SubagentError(f"the message was not delivered: {delivery.error}")
        if not delivery.parts:
            log.warning("a message from %s to %s was posted as nothing", session.key, root.key)
            raise SubagentError(
                "the message was not posted: the platform took none of it",
                hint="say it in other words, or put it in your answer to your parent",
            )
        # The root's agent sees what the person was told: a message that starts no turn,
        # written in order with the root's turns.
        said = TranscriptEntry(
            role="user",
            content=(TextBlock(text=f"{said_prefix(agent)} {text}"),),
            provenance=Provenance(
                channel=INTERNAL_CHANNEL,
                sender_id=session.key,
                sender_name=agent.name,
                source="internal",
            ),
        )
        await self.scheduler.add_context(root, said, dedup_id=f"{turn}:{MESSAGE_TOOL}:{posted}")
        return len(delivery.parts)


def said_prefix(agent: AgentSpec) -> str:
    """How the root's transcript marks what a subagent told the person."""
    return f"[@agent:{agent.name}#{agent.agent_id}] to the person:"


def message_tool(messenger: SubagentMessenger) -> Tool:
    """The ``message`` tool, bound to one bot's messenger."""

    async def message(
        text: Annotated[str, Field(description="what the person should read, in full")],
        ctx: ToolContext,
    ) -> str:
        """Write to the person directly, in the chat of the conversation you work for; it
        appears under your name. Use it sparingly: your result still goes to your parent."""
        parts = await messenger.post(ctx.session, text, ctx.turn_id)
        return f"Posted to the person's chat ({parts} message{'s' if parts != 1 else ''})."

    return make_tool(message, risk="guarded", groups=(MESSAGE_GROUP,), refusal=REFUSAL)
