"""The records agents talk through: an injection (a message one session puts into another),
the trace that travels with it, the announce payload a child's finished turn sends its
parent (seed section 6.2), and what a child session keeps about itself.

All frozen. Payloads travel as JSON in a transcript entry's meta; reading one back that an
older version wrote, or that is damaged, raises :class:`MalformedMetaError` (a clear
message), never a bare validation error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator

from clawbot.errors import MalformedMetaError, SubagentError
from clawbot.messages import Frozen, Provenance, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.runtime.usage import format_usd
from clawbot.scheduling.backlog import MERGED_META
from clawbot.scheduling.jobs import JobStatus

INJECTION_META = "injection"
"""The meta key of an injected entry's header (kind, key, hop, trace, source)."""
ANNOUNCE_META = "subagent_announce"
"""The meta key of an announce's payload."""
ANNOUNCES_META = "subagent_announces"
"""The meta key of the payloads of one announce that carries several reports, in order: a
peer exchange's, which reach the parent together (see ``clawbot.subagents.exchanges``)."""
CHILD_META = "subagent"
"""The session meta key of what a child session keeps about itself."""

SUMMARY_MAX_CHARS = 800
TASK_LINE_CHARS = 300
"""The report block's ``Task:`` line shows the task up to this many characters: enough to
tell which task it was, the parent wrote the whole of it."""
InjectionKind = Literal["task", "message", "announce"]
AnnounceStatus = Literal["ok", "error", "timeout", "cancelled"]
M = TypeVar("M", bound=BaseModel)


def parse_meta(model: type[M], value: Any, what: str) -> M:
    """``value`` (a dict or its JSON text) as ``model``, or a clear MalformedMetaError."""
    try:
        if isinstance(value, str | bytes):
            return model.model_validate_json(value)
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "payload"
        raise MalformedMetaError(f"the {what} is malformed ({where}: {first['msg']})") from None


# traces ---------------------------------------------------------------------------------


class TraceStep(Frozen):
    """One session on a chain of injections, and the agent that ran it."""

    session_key: str
    agent_id: str


class Trace(Frozen):
    """The chain an injection travelled: a trace id (the root turn's) and the sessions it
    passed, root first, the target last. Sessions rather than bare agent ids: a parent may
    spawn a copy of its own agent, which is no loop, while reaching a session already on
    the path is one."""

    trace_id: str
    path: tuple[TraceStep, ...] = ()

    @property
    def agents(self) -> str:
        """The chain as log lines show it: ``main>researcher``."""
        return ">".join(step.agent_id for step in self.path)

    def then(self, step: TraceStep) -> Trace:
        return self.model_copy(update={"path": (*self.path, step)})

    def back(self) -> Trace:
        """The chain an answer travels back along: the last session left off."""
        return self.model_copy(update={"path": self.path[:-1]})

    def loops_back(self) -> bool:
        """The target (the last step) was already on the path: a cycle such as A>B>C>A."""
        if not self.path:
            return False
        *before, target = self.path
        return any(step.session_key == target.session_key for step in before)


class InjectionHeader(Frozen):
    """What every injected entry carries in its meta (under ``injection``)."""

    kind: InjectionKind
    key: str
    hop: int = Field(ge=0)
    trace: Trace
    source_key: str


class Injection(Frozen):
    """A message for another session: persisted there with its provenance and scheduled
    as that session's turn. The only way agents talk to each other.

    ``meta_json`` holds what rides along (an announce's payloads); ``announces`` names the
    child jobs an announce reports, so each is reported at most once."""

    kind: InjectionKind
    target_key: str
    source_key: str
    text: str = Field(min_length=1)
    provenance: Provenance
    channel: Literal["internal"] = "internal"
    deliver: Literal[False] = False
    idempotency_key: str = Field(min_length=1)
    hop: int = Field(ge=0)
    trace: Trace
    meta_json: str = "{}"
    announces: tuple[str, ...] = ()

    @field_validator("meta_json")
    @classmethod
    def _object(cls, value: str) -> str:
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError("not a JSON object")
        return value

    @property
    def header(self) -> InjectionHeader:
        return InjectionHeader(
            kind=self.kind,
            key=self.idempotency_key,
            hop=self.hop,
            trace=self.trace,
            source_key=self.source_key,
        )

    def meta(self) -> dict[str, Any]:
        """The entry's meta: what rides along, plus the header."""
        meta: dict[str, Any] = json.loads(self.meta_json)
        meta[INJECTION_META] = self.header.model_dump(mode="json")
        return meta


@dataclass(frozen=True)
class InjectionWrite:
    """What the store writes with an injected message, in the same transaction: its
    idempotency key (stored once), and for an announce the child jobs it reports (marked
    announced then, all or none, so each is reported once). ``parent_key``: the target is
    a child session, and the turn this starts owes that session an announce."""

    key: str
    kind: InjectionKind
    source_key: str
    hop: int
    parent_key: str | None = None
    announces: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChildRun:
    """One turn of a child session as the announce needs it: how its job ended, and
    whether it was announced to ``parent_key`` yet."""

    job_id: str
    child_key: str
    parent_key: str
    status: JobStatus
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    announced: bool
    merged_into: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "cancelled")


# announces ------------------------------------------------------------------------------


class AnnounceTask(Frozen):
    label: str
    prompt: str
    tags: tuple[str, ...] = ()


class Artifact(Frozen):
    """A stable anchor the child left: a file it wrote (``path``) or a commit (``sha``)."""

    kind: Literal["file", "commit"]
    path: str | None = None
    sha: str | None = None

    @property
    def ref(self) -> str:
        return self.path or self.sha or ""


class AnnounceResult(Frozen):
    status: AnnounceStatus
    summary: str = Field(max_length=SUMMARY_MAX_CHARS)
    artifacts: tuple[Artifact, ...] = ()


class AnnounceStats(Frozen):
    """Null where unknown: litellm's usage gives tokens for most providers; the cost is
    litellm's price for the calls, unknown for a model it has no price for."""

    duration_ms: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    tool_uses: int | None = None
    """Tool calls the child's turn made; None in a report an older version wrote."""


class AnnouncePayload(Frozen):
    """A child's report to its parent (seed section 6.2), kept in the announce entry's
    meta; the persisted text is only ``[@agent:<name>#<agent_id>] finish``."""

    internal: Literal[True] = True
    kind: Literal["subagent_announce"] = "subagent_announce"
    trace_id: str
    hop: int = Field(ge=0)
    idempotency_key: str
    source_agent_id: str
    source_agent_name: str
    source_session_key: str
    source_run_id: str
    task: AnnounceTask
    result: AnnounceResult
    stats: AnnounceStats = AnnounceStats()

    @property
    def text(self) -> str:
        """What is persisted in the parent's transcript."""
        return f"[@agent:{self.source_agent_name}#{self.source_agent_id}] finish"

    def render(self) -> str:
        """The compact block (seed section 6.3) the parent's next turn shows the model,
        for that turn only: never written to the transcript."""
        lines = [
            "[Context: subagent_announce]",
            f"From: {self.source_agent_name}#{self.source_agent_id} "
            f"(session {self.source_session_key})",
            f"Task: {clip(self.task.prompt, TASK_LINE_CHARS) or '(none)'}",
        ]
        label = " ".join(self.task.label.split())
        if label and not " ".join(self.task.prompt.split()).startswith(label):
            lines.append(f"Label: {label}")
        lines += [
            f"Status: {self.result.status}",
            f"Result: {self.result.summary or '(no answer)'}",
        ]
        if self.result.artifacts:
            lines.append("Artifacts: " + ", ".join(a.ref for a in self.result.artifacts))
        stats = self.stats
        parts = []
        if stats.duration_ms is not None:
            parts.append(f"{stats.duration_ms} ms")
        if stats.tokens is not None:
            parts.append(f"{stats.tokens} tokens")
        if stats.cost_usd is not None:
            parts.append(format_usd(stats.cost_usd))
        if parts:
            lines.append("Stats: " + ", ".join(parts))
        lines.append("[/Context]")
        return "\n".join(lines)


def summarize(text: str) -> str:
    """A reply shortened to the payload's summary (at most 800 characters)."""
    return clip(text, SUMMARY_MAX_CHARS)


def clip(text: str, limit: int) -> str:
    """``text`` on one line, whitespace collapsed, cut to ``limit`` characters with ``…``."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1] + "…"


# child sessions -------------------------------------------------------------------------


class ChildInfo(Frozen):
    """What a child session keeps about itself (in its session meta): who spawned it for
    what, how deep it is, how long a run may take, and the tools and skills it may ever use
    (its own agent's, within its parent's)."""

    child_id: str
    parent_key: str
    label: str
    task: str
    depth: int = Field(ge=1)
    timeout: float = Field(gt=0)
    tools: tuple[str, ...] = ()
    skills: tuple[str, ...] | None = None
    """The skills it may ever use (its own agent's, within its parent's); None in a record
    an older version wrote: its agent's, within its tools."""
    delegated: bool = False
    """A delegate (``delegate`` or an agent as tool): its answer is its parent's tool result,
    so its turns owe no announce, and it can neither delegate nor spawn."""
    prompt: str | None = None
    """A role prompt that replaces its agent's system prompt (an ad-hoc delegate role)."""

    @classmethod
    def of(cls, session: Session) -> ChildInfo | None:
        """The session's record, None for a session that is not a child; a clear
        MalformedMetaError when it is unreadable."""
        value = session.meta.get(CHILD_META)
        if value is None:
            return None
        return parse_meta(cls, value, f"subagent record of session {session.key}")

    @classmethod
    def depth_of(cls, session: Session) -> int:
        """How deep ``session`` sits below a person's conversation (0 there), from its
        record; a clear SubagentError when the record is unreadable."""
        try:
            info = cls.of(session)
        except MalformedMetaError as exc:
            raise SubagentError(f"this session cannot start a subagent: {exc.message}") from None
        return info.depth if info is not None else 0

    @classmethod
    def is_delegate(cls, session: Session) -> bool:
        """Whether ``session`` is a delegate; an unreadable record is not one (so its turns
        still report back, as every child's do)."""
        try:
            info = cls.of(session)
        except MalformedMetaError:
            return False
        return info is not None and info.delegated


def payloads_in(meta: dict[str, Any]) -> list[Any]:
    """The announce payloads (unparsed) one entry's meta carries: its own report, or the
    reports of a batch."""
    found = [meta[ANNOUNCE_META]] if ANNOUNCE_META in meta else []
    batch = meta.get(ANNOUNCES_META)
    if isinstance(batch, list):
        found.extend(batch)
    return found


def headers_of(entries: Sequence[TranscriptEntry]) -> list[dict[str, Any]]:
    """The metas of these entries and of the messages merged into them, in order."""
    metas: list[dict[str, Any]] = []
    for entry in entries:
        metas.append(entry.meta)
        merged = entry.meta.get(MERGED_META)
        if isinstance(merged, list):
            metas.extend(item for item in merged if isinstance(item, dict))
    return metas
