"""Compaction: the older part of a conversation summarized into one message, so a long
conversation never outgrows the model's input window.

A compaction asks the session's own model for a summary of every live entry but the last
``compaction_keep_turns`` turns, stores it, and marks the entries it summarized (they stay
in the database: history and audits still read them). From then on the model sees the
summary, then the kept turns verbatim. It runs on ``/compact``, before a model call whose
request nears the window (``compaction_threshold`` of it), and once after a provider says a
request was too long, which is then retried once.

Measuring a request costs little: its characters are summed (microseconds), and only when
they could reach the limit at two characters a token are its tokens counted with litellm
(about 10 ms for 20,000 tokens). A model litellm has no window for gets
``compaction_default_window`` and a pessimistic three characters a token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from clawbot.errors import ClawbotError, CompactionError, ContextLengthError
from clawbot.messages import ToolResultBlock
from clawbot.providers import litellm_module
from clawbot.routing.sessions import Session
from clawbot.runtime.llm import ModelClient
from clawbot.runtime.metering import calls_as
from clawbot.runtime.replies import ModelReply
from clawbot.runtime.text_stream import streaming_to
from clawbot.runtime.transcripts import Transcript, TranscriptCache
from clawbot.scheduling.backlog import shorten
from clawbot.settings import Settings
from clawbot.store import Store
from clawbot.store.records import NewCompaction, StoredEntry

log = logging.getLogger("clawbot.compaction")

Trigger = Literal["manual", "auto", "overflow"]
SUMMARY_PROMPT = (
    "You compact a conversation between a person and an AI assistant so the assistant can "
    "carry on without it. Write a summary as short notes: what the person wants and prefers, "
    "facts, names, numbers, file paths and decisions, what tools found, what was done and "
    "what is still open. Keep what a previous summary says that still matters. Write in the "
    "conversation's language. Answer with the summary only."
)
FALLBACK_CHARS_PER_TOKEN = 3.0
"""A model litellm cannot count for: English runs about four characters a token, code and
many other languages fewer, so three errs towards compacting early."""
EXACT_FROM_CHARS_PER_TOKEN = 2.0
"""A model litellm can count for: its tokens are counted only once the request's characters,
at this many a token, reach the limit. Denser text (Chinese, Japanese) may pass unmeasured;
the provider's context-length error then compacts and retries."""
MESSAGE_OVERHEAD_CHARS = 12
"""What a message's role and framing cost, in characters (about three tokens)."""
ENTRY_CHARS = 4000
"""Most characters of one message shown to the summarizing model; a tool's output gets
``TOOL_CHARS`` (the assistant's reading of it usually says what mattered)."""
TOOL_CHARS = 600


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did: how many stored messages it summarized, how many of the
    latest turns it kept verbatim, and the summary the model sees in their place."""

    messages: int
    kept_turns: int
    summary: str
    trigger: Trigger


@dataclass(frozen=True)
class ModelWindow:
    """A model's input window in tokens; ``known`` when litellm knows the model (its
    tokens can then be counted), else the default window setting."""

    tokens: int
    known: bool


MessagesBuilder = Callable[[], list[dict[str, Any]]]


class ContextMeter:
    """Whether a request nears its model's window, measured cheaply (see the module)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._windows: dict[str, ModelWindow] = {}
        self._tool_chars: dict[int, tuple[Sequence[dict[str, Any]], int]] = {}

    def window(self, model: str) -> ModelWindow:
        found = self._windows.get(model)
        if found is None:
            found = self._windows[model] = self._lookup(model)
        return found

    def _lookup(self, model: str) -> ModelWindow:
        try:
            info = litellm_module().get_model_info(model)
            tokens = info.get("max_input_tokens") or info.get("max_tokens")
        except Exception:  # litellm raises a bare Exception for a model it does not map
            tokens = None
        if isinstance(tokens, int) and tokens > 0:
            return ModelWindow(tokens=tokens, known=True)
        return ModelWindow(tokens=self.settings.compaction_default_window, known=False)

    def limit(self, model: str) -> int:
        """Tokens a request may hold before it is compacted."""
        return int(self.window(model).tokens * self.settings.compaction_threshold)

    def over(
        self, model: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> bool:
        """Whether the request would fill more of the window than the threshold allows."""
        window = self.window(model)
        limit = window.tokens * self.settings.compaction_threshold
        chars = request_chars(messages) + self._tools_chars(tools)
        if not window.known:
            return chars / FALLBACK_CHARS_PER_TOKEN >= limit
        if chars / EXACT_FROM_CHARS_PER_TOKEN < limit:
            return False
        try:
            tokens = litellm_module().token_counter(
                model=model, messages=list(messages), tools=list(tools) or None
            )
        except Exception:  # a message litellm cannot count: estimate it instead
            tokens = chars / FALLBACK_CHARS_PER_TOKEN
        return bool(tokens >= limit)

    def _tools_chars(self, tools: Sequence[dict[str, Any]]) -> int:
        """The tool schemas' size: the same tuple is offered turn after turn, so it is
        measured once (held, so its id stays its own)."""
        if not tools:
            return 0
        found = self._tool_chars.get(id(tools))
        if found is not None and found[0] is tools:
            return found[1]
        if len(self._tool_chars) > 256:
            self._tool_chars.clear()
        size = len(json.dumps(list(tools)))
        self._tool_chars[id(tools)] = (tools, size)
        return size


def request_chars(messages: Sequence[dict[str, Any]]) -> int:
    """The characters of a request's messages, with their tool calls and framing."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif content:
            total += sum(_part_chars(part) for part in content)
        for call in message.get("tool_calls") or ():
            function = call["function"]
            total += len(function["name"]) + len(function["arguments"])
        total += MESSAGE_OVERHEAD_CHARS
    return total


IMAGE_CHARS = 3000
"""What an image in a request counts as, in characters: about the thousand tokens a
provider charges for a picture of a phone's size, never its data URL's length (a 1 MB photo
would otherwise count as a million characters and compact the conversation at once)."""


def _part_chars(part: Any) -> int:
    if isinstance(part, dict) and part.get("type") == "image_url":
        return IMAGE_CHARS
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return len(part["text"])
    return len(json.dumps(part))


class Compactor:
    """Compacts sessions on request, and keeps a turn's model calls within the window."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        client: ModelClient,
        transcripts: TranscriptCache,
    ) -> None:
        self.settings = settings
        self.store = store
        self.client = client
        self.transcripts = transcripts
        self.meter = ContextMeter(settings)
        self._warned: set[str] = set()
        # a session's lock lives while someone holds or awaits it
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def compact(
        self,
        session: Session,
        model: str,
        *,
        instructions: str = "",
        trigger: Trigger = "manual",
        keep_turns: int | None = None,
        held: Sequence[Transcript] = (),
        fallbacks: Sequence[str] = (),
    ) -> CompactionReport | None:
        """Summarize all but the last ``keep_turns`` turns (the setting by default) of the
        session's live conversation with ``model``; None when there is nothing older to
        summarize. Raises CompactionError, changing nothing, when the summary fails.
        ``held`` transcripts (a running turn's) see the result at once; ``fallbacks`` write
        the summary when ``model`` is down."""
        keep = keep_turns or self.settings.compaction_keep_turns
        lock = self._locks.get(session.key)
        if lock is None:
            lock = self._locks[session.key] = asyncio.Lock()
        async with lock:
            report = await self._compact(session, model, instructions, trigger, keep, fallbacks)
        if report is not None:
            await self.transcripts.reload(session, *held)
        return report

    async def _compact(
        self,
        session: Session,
        model: str,
        instructions: str,
        trigger: Trigger,
        keep: int,
        fallbacks: Sequence[str],
    ) -> CompactionReport | None:
        """One compaction at a time per session: a second one waiting reads what the
        first left, so no turn is summarized twice."""
        live = await self.store.transcripts.live(session.key, session.epoch)
        cut = _cut(live.entries, keep)
        if cut == 0:
            return None
        older = live.entries[:cut]
        request = [
            {"role": "system", "content": _prompt(instructions)},
            {"role": "user", "content": self._material(model, live.summary, older)},
        ]
        try:
            # a summary made mid-turn is not the turn's reply; its tokens are counted as a
            # compaction's, the session's (and its turn's, when a turn needed it)
            with streaming_to(None), calls_as("compaction", session):
                reply = await self.client.complete(model, request, fallbacks=fallbacks)
        except ClawbotError as exc:
            raise CompactionError(f"the summary failed: {exc.message}") from None
        summary = reply.text.strip()
        if not summary:
            raise CompactionError("the model gave an empty summary")
        marked = await self.store.transcripts.compact(
            session.key,
            session.epoch,
            NewCompaction(
                summary=summary,
                through_id=older[-1].id,
                trigger=trigger,
                model=model,
                instructions=instructions,
                meta=reply.meta,
            ),
        )
        log.info("compacted %d messages of %s (%s)", marked, session.key, trigger)
        return CompactionReport(messages=marked, kept_turns=keep, summary=summary, trigger=trigger)

    async def complete(
        self,
        session: Session,
        transcript: Transcript,
        model: str,
        build: MessagesBuilder,
        tools: Sequence[dict[str, Any]] = (),
        *,
        temperature: float | None = None,
        fallbacks: Sequence[str] = (),
    ) -> ModelReply:
        """One model call of a turn, kept within the window: ``build`` makes the request
        from ``transcript``, again after a compaction. A request that nears the limit is
        compacted first; one the provider finds too long is compacted and sent once more
        (a fallback model is for a model that is down, never for a request too long).
        ``fallbacks`` answer, and summarize, when ``model`` is down."""
        messages = build()
        tried = False
        if self.settings.compaction_auto and self.meter.over(model, messages, tools):
            if self.meter.over(model, [m for m in messages if m["role"] == "system"], tools):
                # the prompt, tools and summary alone pass the limit: a compaction each
                # turn would cost a call and not help (the overflow retry still may)
                self._warn_fixed(model)
            else:
                tried = True
                if await self._shrink(session, transcript, model, "auto", fallbacks=fallbacks):
                    messages = build()
        try:
            return await self.client.complete(
                model, messages, tools, temperature=temperature, fallbacks=fallbacks
            )
        except ContextLengthError:
            if not await self._shrink(
                session, transcript, model, "overflow", tried=tried, fallbacks=fallbacks
            ):
                raise
        log.info("retrying the model call of %s with its compacted context", session.key)
        return await self.client.complete(
            model, build(), tools, temperature=temperature, fallbacks=fallbacks
        )

    def _warn_fixed(self, model: str) -> None:
        if model not in self._warned:
            self._warned.add(model)
            log.warning(
                "the system prompt and tools of %s requests alone fill more than %.0f %% of its"
                " window (%d tokens): conversations are compacted only when the provider"
                " refuses one as too long",
                model,
                self.settings.compaction_threshold * 100,
                self.meter.window(model).tokens,
            )

    async def _shrink(
        self,
        session: Session,
        transcript: Transcript,
        model: str,
        trigger: Trigger,
        *,
        tried: bool = False,
        fallbacks: Sequence[str] = (),
    ) -> bool:
        """Compact, keeping the setting's turns or, when that leaves nothing older, only
        the current one; False when nothing could be compacted. A failed summary is
        logged, not raised: the turn goes on with what it has. (``tried``: a compaction
        ran just before, so only keeping fewer turns can help.)"""
        keeps = [self.settings.compaction_keep_turns, 1]
        if tried:
            keeps = keeps[1:]
        for keep in dict.fromkeys(keeps):
            try:
                report = await self.compact(
                    session,
                    model,
                    trigger=trigger,
                    keep_turns=keep,
                    held=(transcript,),
                    fallbacks=fallbacks,
                )
            except CompactionError as exc:
                log.warning("could not compact %s (%s): %s", session.key, trigger, exc)
                return False
            if report is not None:
                return True
        return False

    def _material(self, model: str, summary: str | None, older: Sequence[StoredEntry]) -> str:
        """What the summarizing model reads: the previous summary, then the messages to
        summarize, cut from the oldest when together they would not fit the window."""
        budget = int(self.meter.limit(model) * FALLBACK_CHARS_PER_TOKEN) - len(SUMMARY_PROMPT)
        lines = [_line(stored) for stored in older]
        head = f"The summary so far:\n{summary}\n\n" if summary else ""
        body = "\n".join(lines)
        if len(head) + len(body) > budget:
            body = "[the oldest messages are left out]\n" + body[-max(budget - len(head), 0) :]
        return f"{head}The conversation to summarize:\n{body}"


def _prompt(instructions: str) -> str:
    instructions = instructions.strip()
    if not instructions:
        return SUMMARY_PROMPT
    return f"{SUMMARY_PROMPT}\n\nThe person asks of this summary: {instructions}"


def _cut(entries: Sequence[StoredEntry], keep: int) -> int:
    """Where the last ``keep`` turns begin (a turn begins at a user message after one that
    is not): everything before it is summarized; 0 when nothing is before it."""
    starts = [
        index
        for index, stored in enumerate(entries)
        if stored.entry.role == "user" and (index == 0 or entries[index - 1].entry.role != "user")
    ]
    return starts[-keep] if len(starts) >= keep else 0


def _line(stored: StoredEntry) -> str:
    entry = stored.entry
    if entry.role == "tool":
        return "\n".join(
            f"tool {block.name}: {shorten(block.content, TOOL_CHARS)}"
            for block in entry.content
            if isinstance(block, ToolResultBlock)
        )
    parts = [entry.text] if entry.text else []
    parts.extend(
        f"[called {call.name} {shorten(json.dumps(call.arguments), TOOL_CHARS)}]"
        for call in entry.tool_calls
    )
    return f"{entry.role}: {shorten(' '.join(parts), ENTRY_CHARS)}"
