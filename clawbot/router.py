"""The router: every inbound message enters here.

It rejects bad input with a clear reply, resolves the session, answers slash commands without
an LLM call, and runs agent turns one at a time per session, delivering replies through the
outbox. A failure handling one message never stops the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from clawbot.commands import CommandContext, CommandRegistry, builtin_commands, parse_command
from clawbot.errors import ClawbotError
from clawbot.messages import InboundMessage, OutboundMessage, Provenance, TextBlock, TranscriptEntry
from clawbot.outbox import Delivery, Outbox
from clawbot.runtime import Runtime, TurnResult
from clawbot.sessions import Session, session_key_for
from clawbot.settings import Settings
from clawbot.store import Store

log = logging.getLogger("clawbot.router")

TYPING_REFRESH_SECONDS = 4.0


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


AccessCheck = Callable[[InboundMessage], Awaitable[AccessDecision]]


async def allow_everyone(message: InboundMessage) -> AccessDecision:
    return AccessDecision(allow=True)


@dataclass(frozen=True)
class Handled:
    """The outcome of one inbound message, for callers that wait on it (console, tests)."""

    kind: Literal["turn", "command", "rejected", "duplicate", "ignored", "error"]
    reply: str | None = None
    delivery: Delivery | None = None
    turn: TurnResult | None = None


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
    ) -> None:
        self.settings = settings
        self.store = store
        self.runtime = runtime
        self.outbox = outbox
        self.commands = commands or builtin_commands()
        self.access = access
        self._sessions: dict[str, Session] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def handle(self, message: InboundMessage) -> Handled:
        """Process one inbound message to completion; never raises."""
        try:
            return await self._handle(message)
        except ClawbotError as exc:
            log.error("could not handle a %s message: %s", message.channel, exc)
            return await self._reply(message, f"Sorry, that failed: {exc}", kind="error")
        except Exception:
            log.exception("unexpected error handling a %s message", message.channel)
            return await self._reply(
                message, "Sorry, something went wrong on my side. Please try again.", kind="error"
            )

    async def _handle(self, message: InboundMessage) -> Handled:
        decision = await self.access(message)
        if not decision.allow:
            if decision.reply:
                return await self._reply(message, decision.reply, kind="rejected")
            return Handled(kind="ignored")
        problem = self._input_problem(message)
        if problem:
            return await self._reply(message, problem, kind="rejected")
        command = parse_command(message.text)
        if command is not None:
            if not decision.commands:
                return Handled(kind="ignored")
            session = await self.session_for(message)
            name, args = command
            context = CommandContext(router=self, session=session, message=message, args=args)
            text = await self.commands.dispatch(name, context)
            return await self._reply(message, text, kind="command", session=context.session)
        session = await self.session_for(message)
        entry = _user_entry(message)
        if not decision.start_turn:
            # Kept as context: stored once (redeliveries deduplicated), in order with the
            # session's turns, and visible to the next turn through the transcript cache.
            async with self._session_lock(session.key):
                session = await self.session_for(message)
                transcript = await self.runtime.transcripts.get(session)
                if await self.store.append_context(session, entry, dedup_id=message.message_id):
                    transcript.append([entry])
            return Handled(kind="ignored")
        async with self._session_lock(session.key):
            session = await self.session_for(message)
            turn_id = await self.runtime.accept(session, entry, dedup_id=message.message_id)
            if turn_id is None:
                log.info("dropped a redelivered %s message %s", message.channel, message.message_id)
                return Handled(kind="duplicate")
            async with self._typing(message):
                result = await self.runtime.run_turn(session, turn_id)
        delivery = await self._send(message, result.reply, session, kind="reply")
        if delivery.status == "failed":
            await self.store.mark_delivery_failed(turn_id, delivery.error or "unknown")
        return Handled(kind="turn", reply=result.reply, delivery=delivery, turn=result)

    def _input_problem(self, message: InboundMessage) -> str | None:
        text = message.text
        if not text.strip() and not message.attachments:
            return "Your message was empty. Type something for the agent, or /help."
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
        session = self._sessions.get(key)
        if session is None:
            session = await self.store.get_session(key)
            if session is None:
                session = await self.store.create_session(
                    Session.for_message(message, self.settings.agent)
                )
            self._sessions[key] = session
        return session

    async def update_session(self, session: Session, **changes: Any) -> Session:
        # Apply the changes to the freshest copy: a tool holding the turn's snapshot must not
        # undo a command (or another tool) that changed the session meanwhile.
        updated = self._sessions.get(session.key, session).with_changes(**changes)
        await self.store.save_session(updated)
        self._sessions[updated.key] = updated
        if "epoch" in changes:
            self.runtime.transcripts.forget(updated.key)
        return updated

    async def status_text(self, session: Session) -> str:
        resolved = self.runtime.resolve(session)
        source = resolved.model_source
        transcript = await self.runtime.transcripts.get(session)
        files = ", ".join(resolved.prompt_files) or "none"
        return "\n".join(
            [
                f"Agent: {resolved.agent.name} ({resolved.agent.agent_id})",
                f"Model: {resolved.model} ({source})",
                f"Session: {session.key}",
                f"Messages in this conversation: {len(transcript.entries)}",
                f"Tools: {', '.join(t.name for t in resolved.tools) or 'none'}",
                f"Skills: {', '.join(s.name for s in resolved.skills) or 'none'}",
                f"Prompt files: {files}",
            ]
        )

    @contextlib.asynccontextmanager
    async def _session_lock(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and not lock._waiters:  # type: ignore[attr-defined]
                self._locks.pop(key, None)

    # delivery --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _typing(self, message: InboundMessage) -> AsyncIterator[None]:
        adapter = self.outbox.adapter(message.channel)
        if adapter is None or not adapter.supports_typing:
            yield
            return

        async def refresh() -> None:
            while True:
                await self.outbox.typing(message.channel, message.chat_id, message.thread_id)
                await asyncio.sleep(TYPING_REFRESH_SECONDS)

        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _reply(
        self,
        message: InboundMessage,
        text: str,
        *,
        kind: Literal["command", "rejected", "error"],
        session: Session | None = None,
    ) -> Handled:
        delivery = await self._send(
            message, text, session, kind="error" if kind == "error" else "notice"
        )
        return Handled(kind=kind, reply=text, delivery=delivery)

    async def _send(
        self,
        message: InboundMessage,
        text: str,
        session: Session | None,
        *,
        kind: Literal["reply", "notice", "error"],
    ) -> Delivery:
        return await self.outbox.deliver(
            OutboundMessage(
                channel=message.channel,
                chat_id=message.chat_id,
                thread_id=message.thread_id,
                text=text,
                reply_to_message_id=message.message_id if message.chat_type != "dm" else None,
                session_key=session.key if session else session_key_for(message),
                deliver=session.deliver if session else True,
                kind=kind,
            )
        )


def _user_entry(message: InboundMessage) -> TranscriptEntry:
    text = message.text
    if message.reply_to is not None and message.reply_to.text:
        quoted = message.reply_to.text[:500]
        who = message.reply_to.sender_name or "someone"
        text = f"[replying to {who}: {quoted}]\n{text}"
    if message.attachments:
        listing = ", ".join(
            f"{a.name} ({a.mime_type}, {a.size if a.size is not None else '?'} bytes)"
            for a in message.attachments
        )
        text = f"{text}\n[attachments: {listing}]".strip()
    meta: dict[str, Any] = {}
    if message.chat_type != "dm":
        # In a group the model must know who is speaking.
        who = message.sender_name or message.sender_id
        text = f"[{who}] {text}"
        meta["sender"] = who
    return TranscriptEntry(
        role="user",
        content=(TextBlock(text=text),),
        provenance=Provenance(
            channel=message.channel,
            sender_id=message.sender_id,
            sender_name=message.sender_name,
            message_id=message.message_id,
            source="user",
        ),
        meta=meta,
    )
