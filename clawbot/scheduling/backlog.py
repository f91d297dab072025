"""The session backlog: messages deferred while a turn was in flight and resume tokens of
interrupted work. At the start of the session's next turn it is drained into ONE
``[Backlog]`` user message: the deferred messages in order, then the resume tokens, so an
interrupted task continues after the answer that interrupted it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import Field

from clawbot.messages import Frozen, Provenance, TextBlock, ToolResultBlock, TranscriptEntry
from clawbot.scheduling.jobs import Lane

BACKLOG_HEADER = "[Backlog]"
BACKLOG_META = "backlog"
"""The meta key under which a ``[Backlog]`` entry lists the jobs it merged."""
MERGED_META = "merged_meta"
"""The meta key under which a ``[Backlog]`` entry keeps the meta of the messages it merged."""
ASKED_META = "asked"
"""The meta key under which a ``[Backlog]`` entry keeps the people's messages it stands for,
so a notice giving up on its turn can quote each of them (see :func:`asked_in`)."""
MAX_ASKED_CHARS = 200
"""Each message kept under ``ASKED_META`` is shortened to this (a notice quotes less)."""
MAX_TASK_CHARS = 600
MAX_STEP_CHARS = 200
MAX_STEPS = 20

ResumeReason = Literal["steer", "shutdown"]


class ResumeStep(Frozen):
    """One tool call an interrupted turn made, shortened for the resume token."""

    call: str
    result: str


class ResumeToken(Frozen):
    """What an interrupted turn was doing and the tool results it had so far."""

    task: str
    steps: tuple[ResumeStep, ...] = ()
    reason: ResumeReason = "steer"
    asked: tuple[str, ...] = ()
    """The people's messages the interrupted turn was answering (a failure notice quotes
    them); empty for an internal turn, or a token stored before they were kept."""

    def render(self) -> str:
        why = "a newer message interrupted you" if self.reason == "steer" else "clawbot restarted"
        lines = [f'Resume the task you were working on when {why}: "{self.task}"']
        if self.steps:
            lines.append("Tool calls already made (full results are earlier in this chat):")
            lines.extend(f"- {step.call} -> {step.result}" for step in self.steps)
        lines.append("Continue from where you stopped.")
        return "\n".join(lines)


class BacklogItem(Frozen):
    """A deferred message (its user entry, not yet in the transcript) or a resume token.

    ``steers`` marks a person's message (main lane, not the internal channel) that arrived
    while a turn was in flight: the running turn yields to it at the next safe tool
    boundary. It lives only in memory; after a restart everything left in the backlog runs
    as one ``[Backlog]`` turn.
    """

    kind: Literal["message", "resume"]
    job_id: str
    lane: Lane = "main"
    entry: TranscriptEntry | None = None
    resume: ResumeToken | None = None
    reply_to: str | None = None
    steers: bool = Field(default=False, exclude=True)

    @property
    def text(self) -> str:
        if self.entry is not None:
            # the files themselves follow the merged list (see ``merge_backlog``)
            sent = ", ".join(a.name for a in self.entry.attachments)
            return self.entry.text or (f"(sent {sent})" if sent else "")
        return self.resume.render() if self.resume is not None else ""


def shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def resume_token(
    task: str,
    entries: Iterable[TranscriptEntry],
    *,
    earlier: Sequence[ResumeStep] = (),
    reason: ResumeReason = "steer",
    asked: Sequence[str] = (),
) -> ResumeToken:
    """The token for a turn that stopped at a tool boundary: its task and each tool call it
    made (with ``earlier`` steps of the work it was itself resuming), and the people's
    messages it answers."""
    calls = {}
    steps = list(earlier)
    for entry in entries:
        for call in entry.tool_calls:
            calls[call.id] = f"{call.name}({json.dumps(call.arguments, sort_keys=True)})"
        for block in entry.content:
            if isinstance(block, ToolResultBlock) and block.tool_call_id in calls:
                steps.append(
                    ResumeStep(
                        call=shorten(calls[block.tool_call_id], MAX_STEP_CHARS),
                        result=shorten(block.content, MAX_STEP_CHARS),
                    )
                )
    return ResumeToken(
        task=shorten(task, MAX_TASK_CHARS),
        steps=tuple(steps[-MAX_STEPS:]),
        reason=reason,
        asked=tuple(shorten(text, MAX_ASKED_CHARS) for text in asked),
    )


def merge_backlog(items: Sequence[BacklogItem], turn_id: str) -> TranscriptEntry:
    """ONE user entry for a backlog turn: deferred messages in order, then resume tokens."""
    messages = [item for item in items if item.kind == "message"]
    resumes = [item for item in items if item.kind == "resume"]
    lines = [BACKLOG_HEADER]
    if messages:
        lines.append("Messages that arrived while you were busy, oldest first:")
        lines.extend(f"{n}. {item.text}" for n, item in enumerate(messages, 1))
    if resumes:
        lines.append(
            "Interrupted work to resume after answering them:"
            if messages
            else "Interrupted work to resume:"
        )
        lines.extend(f"{n}. {item.text}" for n, item in enumerate(resumes, 1))
    last = next((m.entry for m in reversed(messages) if m.entry is not None), None)
    provenance = (
        last.provenance.model_copy(update={"source": "system"})
        if last is not None
        else Provenance(source="system")
    )
    meta: dict[str, Any] = {BACKLOG_META: [item.job_id for item in items]}
    asked = _asked_by(items)
    if asked:
        meta[ASKED_META] = asked
    # What rides in merged internal messages' meta (an announce's payload, an injection's
    # hop and trace) stays readable for the turn that answers them.
    carried = [
        m.entry.meta
        for m in messages
        if m.entry is not None and m.entry.provenance.source == "internal" and m.entry.meta
    ]
    if carried:
        meta[MERGED_META] = carried
    # The files the merged messages carried stay references the turn can fetch.
    attached = [block for m in messages if m.entry is not None for block in m.entry.attachments]
    return TranscriptEntry(
        role="user",
        content=(TextBlock(text="\n".join(lines)), *attached),
        provenance=provenance,
        meta=meta,
        turn_id=turn_id,
    )


def _asked_by(items: Sequence[BacklogItem]) -> list[str]:
    """The people's messages backlog items stand for, in the order the turn lists them."""
    asked = [
        shorten(item.entry.text, MAX_ASKED_CHARS)
        for item in items
        if item.kind == "message"
        and item.entry is not None
        and item.entry.provenance.source == "user"
    ]
    for item in items:
        if item.resume is not None and item.lane == "main":
            asked.extend(item.resume.asked or (shorten(item.resume.task, MAX_ASKED_CHARS),))
    return asked


def asked_in(entries: Iterable[TranscriptEntry]) -> list[str]:
    """The people's messages a turn's input entries stand for, oldest first and each once:
    what a notice giving up on the turn quotes. A ``[Backlog]`` entry stands for the
    messages it merged (a turn resumed after a steer has its first input and the one that
    resumed it, both standing for the same messages)."""
    asked: list[str] = []
    for entry in entries:
        if entry.role != "user":
            continue
        if BACKLOG_META in entry.meta:
            kept = entry.meta.get(ASKED_META)
            if isinstance(kept, list):
                asked.extend(str(text) for text in kept)
        elif entry.provenance.source == "user":
            asked.append(shorten(entry.text, MAX_ASKED_CHARS))
    return list(dict.fromkeys(asked))


def task_of(items: Sequence[BacklogItem]) -> tuple[str, tuple[ResumeStep, ...]]:
    """What a backlog turn works on (for its own resume token if it is interrupted too)."""
    parts = [item.text for item in items if item.kind == "message"]
    steps: list[ResumeStep] = []
    for item in items:
        if item.resume is not None:
            parts.append(item.resume.task)
            steps.extend(item.resume.steps)
    return "; ".join(parts), tuple(steps)
