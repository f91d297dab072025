"""Memories as files: JSON Lines (one memory a line, every field, what ``clawbot memory
import`` reads back, so a round trip loses nothing) and Markdown (for reading and for
diffing in Git; an audit, not read back).

An import checks every line as a memory written by a tool would be checked (key, tags, the
size cap), and keeps the good lines when others are broken: each broken one is reported by
its line number and left out."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from clawbot.errors import MemoryInputError
from clawbot.memory.records import Memory, check_key, check_tags, check_text


@dataclass(frozen=True)
class LineProblem:
    """A line of an import file that was left out, and why."""

    line: int
    message: str


@dataclass(frozen=True)
class ParsedFile:
    """What an import file holds: the memories of its good lines, and its broken lines."""

    memories: tuple[Memory, ...]
    problems: tuple[LineProblem, ...]


class _MemoryLine(BaseModel):
    """One exported memory, as a line of JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str
    key: str
    text: str
    tags: tuple[str, ...] = ()
    session_key: str
    agent_id: str
    created_at: datetime
    updated_at: datetime

    @field_validator("created_at", "updated_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("needs a time zone, e.g. +00:00")
        return value.astimezone(UTC)


def to_jsonl(memory: Memory) -> str:
    """One memory as one line of JSON (without the newline)."""
    return json.dumps(
        {
            "namespace": memory.namespace,
            "key": memory.key,
            "text": memory.text,
            "tags": list(memory.tags),
            "session_key": memory.session_key,
            "agent_id": memory.agent_id,
            "created_at": memory.created_at.isoformat(),
            "updated_at": memory.updated_at.isoformat(),
        },
        ensure_ascii=False,
    )


def to_markdown(memories: Sequence[Memory]) -> str:
    """Every memory under a heading of its own, with where it came from."""
    parts = [f"# Memories ({len(memories)})\n"]
    for memory in memories:
        tags = f"tags: {', '.join(memory.tags)} · " if memory.tags else ""
        parts.append(
            f"## {memory.ref}\n\n"
            f"_{tags}written by {memory.agent_id} in {memory.session_key} · "
            f"created {memory.created_at:%Y-%m-%d %H:%M} · "
            f"updated {memory.updated_at:%Y-%m-%d %H:%M} UTC_\n\n"
            f"{memory.text.strip()}\n"
        )
    return "\n".join(parts)


def parse_jsonl(lines: Iterable[str], max_chars: int) -> ParsedFile:
    """The memories of an exported file; blank lines are skipped, broken ones reported."""
    memories: list[Memory] = []
    problems: list[LineProblem] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            memories.append(_parse_line(line, max_chars))
        except ValueError as exc:  # json's and pydantic's errors are ValueErrors
            problems.append(LineProblem(number, _reason(exc)))
        except MemoryInputError as exc:
            problems.append(LineProblem(number, str(exc)))
    return ParsedFile(tuple(memories), tuple(problems))


def _parse_line(line: str, max_chars: int) -> Memory:
    parsed = _MemoryLine.model_validate_json(line)
    namespace = parsed.namespace.strip()
    if not namespace or ":" in namespace:
        raise MemoryInputError(f"the namespace {namespace!r} is not valid")
    return Memory(
        namespace=namespace,
        key=check_key(parsed.key),
        text=check_text(parsed.text, max_chars),
        tags=check_tags(parsed.tags),
        session_key=parsed.session_key,
        agent_id=parsed.agent_id,
        created_at=parsed.created_at,
        updated_at=parsed.updated_at,
    )


def _reason(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        if first["type"] == "json_invalid":
            return "not valid JSON"
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc)
