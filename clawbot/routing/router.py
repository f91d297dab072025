"""The router: every inbound message enters here.

It rejects bad input with a clear reply, resolves the session, answers slash commands without
an LLM call, and hands messages for the agent to the scheduler, which stores them, runs one
turn at a time per session and delivers replies through the outbox. A failure handling one
message never stops the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from clawbot.channels.outbox import Delivery, Outbox
from clawbot.commands.builtin import builtin_commands
from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.errors import ClawbotError
from clawbot.lru import LRUCache
from clawbot.messages import (
    INTERNAL_CHANNEL,
    AttachmentBlock,
    InboundMessage,
    OutboundMessage,
    Provenance,
    TextBlock,
    TranscriptEntry,
    parse_command,
)
from clawbot.routing.rate_limit import SenderRateLimit
from clawbot.routing.sessions import Session, session_key_for
from clawbot.runtime.control import TurnResult
from clawbot.runtime.metering import root_key_of
from clawbot.runtime.turn import Runtime
from clawbot.runtime.usage import UsageFilter
from clawbot.scheduling.jobs import Lane
from clawbot.scheduling.records import TurnHandle
from clawbot.scheduling.scheduler import Scheduler
from clawbot.settings import Settings
from clawbot.store import Store, new_id

log = logging.getLogger("clawbot.router")


@dataclass(frozen=True)
class AccessDecision:
    """What the gateway decided about an inbound message.

    ``allow`` lets it through; ``reply`` (when set) is sent to the sender either way;
    ``commands`` says whether slash commands from this sender are accepted.
    """

    allow: bool
    reply: str | None = None
    commands: bool = True
    start_turn: bool = True


ALLOW = AccessDecision(allow=True)
"""The decision of nearly every message, made once: it is immutable, and building one
sets four fields through ``object.__setattr__`` (about 9,000 instructions)."""

AccessCheck = Callable[[InboundMessage], Awaitable[AccessDecision]]


async def allow_everyone(message: InboundMessage) -> AccessDecision:
    return ALLOW


@dataclass(frozen=True)
class Handled:
    """The outcome of one inbound message, for callers that wait on it (console, tests)."""

    kind: Literal[
        "turn", "command", "rejected", "duplicate", "ignored", "error", "cancelled", "deferred"
    ]
    reply: str | None = None
    delivery: Delivery | None = None
    turn: TurnResult | None = None
    elsewhere: str | None = None
    """The other process that runs the session's turns and answers this message there."""


@dataclass(frozen=True)
class Receipt:
    """What :meth:`Router.receive` did with a message: stored and queued for a turn
    (``job``), or already answered (``handled``: a command, a rejection, a duplicate)."""

    handled: Handled | None = None
    job: TurnHandle | None = None

    async def wait(self) -> Handled:
        """The message's outcome; for a turn, once its reply went out."""
        if self.job is None:
            return self.handled or Handled(kind="ignored")
        outcome = await self.job.outcome()
        status = outcome.status
        return Handled(
            kind="turn" if status == "done" or status == "failed" else status,
            reply=outcome.reply,
            delivery=outcome.delivery,
            turn=outcome.result,
            elsewhere=outcome.elsewhere,
        )


class Router:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        runtime: Runtime,
        outbox: Outbox,
        commands: CommandRegistry | None = None,
        access: AccessCheck = allow_everyone,
        scheduler: Scheduler | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.runtime = runtime
        self.outbox = outbox
        self.commands = commands or builtin_commands()
        self.access = access
        self.scheduler = scheduler or Scheduler(
            settings=settings, store=store, runtime=runtime, outbox=outbox
        )
        # The recently active sessions; any other is read back from the store when it speaks.
        self.sessions: LRUCache[str, Session] = LRUCache(settings.session_cache_size)
        self._loading: dict[str, asyncio.Future[Session]] = {}
        self.rate_limit = SenderRateLimit(
            settings.rate_limit_per_minute,
            settings.rate_limit_burst,
            # The operator's own terminal and the sessions' own traffic are never limited.
            exempt=frozenset({"console", INTERNAL_CHANNEL}),
        )

    async def handle(self, message: InboundMessage) -> Handled:
        """Process one inbound message to completion (its reply sent); never raises."""
        receipt = await self.receive(message)
        return await receipt.wait()

    async def receive(self, message: InboundMessage) -> Receipt:
        """Check, store and queue one inbound message, and return without waiting for its
        turn: once this returns the message is durable, so an adapter may acknowledge it to
        the platform. Commands and rejections are answered before it returns. Never raises.
        """
        try:
            return await self._receive(message)
        except ClawbotError as exc:
            log.error("could not handle a %s message: %s", message.channel, exc)
            handled = await self._reply(message, f"Sorry, that failed: {exc}", kind="error")
        except Exception:
            log.exception("unexpected error handling a %s message", message.channel)
            handled = await self._reply(
                message, "Sorry, something went wrong on my side. Please try again.", kind="error"
            )
        return Receipt(handled=handled)

    async def _receive(self, message: InboundMessage) -> Receipt:
        decision = await self.access(message)
        if not decision.allow:
            if decision.reply:
                return Receipt(await self._reply(message, decision.reply, kind="rejected"))
            return Receipt(Handled(kind="ignored"))
        verdict = self.rate_limit.check(message)
        if verdict != "admit":
            who = message.sender_id
            log.warning("rate limit: refused a %s message of %s", message.channel, who)
            if verdict == "refuse quietly":
                return Receipt(Handled(kind="ignored"))
            wait = self.rate_limit.wait_seconds()
            return Receipt(
                await self._reply(
                    message,
                    "You're sending messages faster than I can take them, so I'm skipping "
                    f"some. Please wait about {wait} s, then send again what I should answer.",
                    kind="rejected",
                )
            )
        problem = self._input_problem(message)
        if problem:
            return Receipt(await self._reply(message, problem, kind="rejected"))
        command = parse_command(message.text)
        if command is not None:
            if not decision.commands:
                return Receipt(Handled(kind="ignored"))
            session = await self.session_for(message)
            name, args = command
            context = CommandContext(sessions=self, session=session, message=message, args=args)
            text = await self.commands.dispatch(name, context)
            return Receipt(
                await self._reply(
                    message, text, kind="command", session=context.session, private=context.private
                )
            )
        session = await self.session_for(message)
        if not decision.start_turn:
            # Kept as context: stored once (redeliveries deduplicated), in order with the
            # session's turns (after the running one), visible to the next turn.
            kept = _user_entry(message, turn_id=None)
            await self.scheduler.add_context(session, kept, dedup_id=message.message_id)
            return Receipt(Handled(kind="ignored"))
        lane: Lane = "announce" if message.channel == INTERNAL_CHANNEL else "main"
        job = await self.scheduler.submit(
            session,
            _user_entry(message, turn_id=new_id("turn")),
            lane=lane,
            reply_to=message.message_id,
            dedup_id=message.message_id,
        )
        if job is None:
            log.info("dropped a redelivered %s message %s", message.channel, message.message_id)
            return Receipt(Handled(kind="duplicate"))
        return Receipt(job=job)

    def _input_problem(self, message: InboundMessage) -> str | None:
        text = message.text
        if not text.strip() and not message.attachments:
            return "Your message was empty. Type something for the agent, or /help."
        files, most = len(message.attachments), self.settings.attachments_per_message
        if files > most:
            return (
                f"Your message carries {files} files; I take at most {most} in one message "
                "(CLAWBOT_ATTACHMENTS_PER_MESSAGE). Send them in smaller groups."
            )
        limit = self.settings.max_message_chars
        if len(text) > limit:
            return (
                f"Your message is too long ({len(text):,} characters; the limit is {limit:,}). "
                "Split it into smaller messages or send it as a file."
            )
        return None

    # sessions --------------------------------------------------------------------------

    async def session_for(self, message: InboundMessage) -> Session:
        key = session_key_for(message)
        session = self.sessions.get(key)
        if session is not None:
            return session
        # Messages for a session not yet loaded share one load (a burst would otherwise
        # make each of them read, and try to create, the same row).
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.ensure_future(self._load_session(message))
            loading.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(loading)

    async def _load_session(self, message: InboundMessage) -> Session:
        key = session_key_for(message)
        opened = await self.store.sessions.open(Session.for_message(message, self.settings.agent))
        if opened.created:
            self.runtime.transcripts.started(opened.session)
        return self.sessions.setdefault(key, opened.session)

    async def update_session(self, session: Session, **changes: Any) -> Session:
        # Apply the changes to the freshest copy: a tool holding the turn's snapshot must not
        # undo a command (or another tool) that changed the session meanwhile. That copy is
        # the cached one, or the store's when the session has left the cache.
        current = self.sessions.get(session.key) or await self.store.sessions.get(session.key)
        updated = (current or session).with_changes(**changes)
        await self.store.sessions.save(updated)
        self.sessions.put(updated.key, updated)
        self.scheduler.refresh(updated)
        if "epoch" in changes:
            self.runtime.transcripts.forget(updated.key)
        return updated

    async def status_text(self, session: Session) -> str:
        resolved = self.runtime.resolve(session)
        source = resolved.model_source
        files = ", ".join(resolved.prompt_files) or "none"
        stored = await self.store.transcripts.count(session.key, session.epoch)
        reach = await self.runtime.reach(session)
        spent = await self.store.usage.totals(UsageFilter(root_key=root_key_of(session)))
        return "\n".join(
            [
                f"Agent: {resolved.agent.name} ({resolved.agent.agent_id})",
                f"Model: {resolved.model} ({source})",
                *([f"Fallbacks: {', '.join(resolved.fallbacks)}"] if resolved.fallbacks else []),
                *await self.runtime.plugins.status(session),
                f"Session: {session.key}",
                f"Messages in this conversation: {stored}",
                f"Cost so far (subagents included): {spent.describe()}",
                f"Tools: {', '.join(t.name for t in resolved.tools) or 'none'}",
                f"Files: {reach.describe()}",
                f"Skills: {', '.join(s.name for s in resolved.skills) or 'none'}",
                f"Prompt files: {files}",
            ]
        )

    # delivery --------------------------------------------------------------------------

    async def _reply(
        self,
        message: InboundMessage,
        text: str,
        *,
        kind: Literal["command", "rejected", "error"],
        session: Session | None = None,
        private: bool = False,
    ) -> Handled:
        delivery = await self._send(
            message, text, session, kind="error" if kind == "error" else "notice", private=private
        )
        return Handled(kind=kind, reply=text, delivery=delivery)

    async def tell(self, message: InboundMessage, text: str) -> None:
        """Send ``text`` to the chat ``message`` came from, as a notice."""
        await self._send(message, text, None, kind="notice")

    async def _send(
        self,
        message: InboundMessage,
        text: str,
        session: Session | None,
        *,
        kind: Literal["reply", "notice", "error"],
        private: bool = False,
    ) -> Delivery:
        return await self.outbox.deliver(
            OutboundMessage(
                channel=message.channel,
                chat_id=message.chat_id,
                thread_id=message.thread_id,
                text=text,
                reply_to_message_id=message.message_id,
                session_key=session.key if session else session_key_for(message),
                deliver=session.deliver if session else True,
                kind=kind,
                private_to=message.sender_id if private and message.chat_type != "dm" else None,
            )
        )


def _user_entry(message: InboundMessage, *, turn_id: str | None) -> TranscriptEntry:
    text = message.text
    if message.reply_to is not None and message.reply_to.text:
        quoted = message.reply_to.text[:500]
        who = message.reply_to.sender_name or "someone"
        text = f"[replying to {who}: {quoted}]\n{text}"
    meta: dict[str, Any] = {}
    if message.chat_type != "dm":
        # In a group the model must know who is speaking.
        who = message.sender_name or message.sender_id
        text = f"[{who}] {text}" if text else f"[{who}]"
        meta["sender"] = who
    # Files stay references to the platform's copies; a turn fetches what it needs.
    attached = tuple(AttachmentBlock.of(message.channel, a) for a in message.attachments)
    return TranscriptEntry(
        role="user",
        content=(TextBlock(text=text), *attached),
        provenance=Provenance(
            channel=message.channel,
            sender_id=message.sender_id,
            sender_name=message.sender_name,
            message_id=message.message_id,
            source="user",
        ),
        meta=meta,
        turn_id=turn_id,
    )
