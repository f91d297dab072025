"""Agent definitions as TOML files: ``agents/<agent_id>.toml``, one AgentSpec each.

Reading reports a broken file by name and line, and an invalid spec by field; writing
produces a file that reads back to the same spec (``clawbot agents export``).
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawbot.agents.profiles import AgentSpec, spec_problems
from clawbot.errors import ConfigError

_POSITION = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$")


class AgentFileError(ConfigError):
    """An agent file cannot be read or does not describe a valid agent."""

    hint = "fix the file (the other agents still load) and restart clawbot"


@dataclass(frozen=True)
class AgentFile:
    path: Path
    spec: AgentSpec
    content_hash: str


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def read_agent_file(path: Path) -> AgentFile:
    """Parse and validate one agent file; an AgentFileError names the file, line and field."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentFileError(f"{path.name}: cannot read it: {exc}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _POSITION.search(message)
        if found and found.group(1):
            where = f"line {found.group(1)}, column {found.group(2)}"
        else:
            where = f"line {max(len(text.splitlines()), 1)} (end of file)"
        if found:
            message = message[: found.start()]
        raise AgentFileError(f"{path.name}: {where}: {message}") from None
    raw.setdefault("agent_id", path.stem)
    try:
        spec = AgentSpec.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for loc, _kind, message in spec_problems(exc):
            line = _line_of(text, loc)
            at = f"line {line}: " if line else ""
            problems.append(f"{at}{'.'.join(loc)}: {message}")
        raise AgentFileError(f"{path.name}: " + "; ".join(problems)) from None
    if spec.agent_id != path.stem:
        line = _line_of(text, ("agent_id",))
        raise AgentFileError(
            f"{path.name}: line {line}: agent_id {spec.agent_id!r} does not match the file name",
            hint=f"rename the file to {spec.agent_id}.toml or set agent_id = {path.stem!r}",
        )
    return AgentFile(path=path, spec=spec, content_hash=content_hash(data))


def _line_of(text: str, loc: tuple[str, ...]) -> int | None:
    """Best effort: the line where the offending key is written."""
    if not loc:
        return None
    lines = text.splitlines()
    table = None
    key = loc[0]
    if len(loc) > 1 and not loc[1].isdigit():
        table, key = loc[0], loc[1]
    current: str | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]", stripped)
        if header:
            current = header.group(1)
            continue
        if table is None and current is None and re.match(rf"{re.escape(key)}\s*=", stripped):
            return number
        if table is not None:
            dotted = rf"{re.escape(table)}\s*\.\s*{re.escape(key)}\s*="
            if current is None and re.match(dotted, stripped):
                return number
            if current == table and re.match(rf"{re.escape(key)}\s*=", stripped):
                return number
    return None


def load_agent_folder(folder: Path) -> tuple[list[AgentFile], list[str]]:
    """Every readable agent file of ``folder`` and one problem line per broken one."""
    files: list[AgentFile] = []
    problems: list[str] = []
    if not folder.is_dir():
        return files, problems
    for path in sorted(folder.glob("*.toml")):
        try:
            files.append(read_agent_file(path))
        except AgentFileError as exc:
            problems.append(str(exc))
    return files, problems


_TOP_LEVEL = (
    "agent_id",
    "name",
    "description",
    "model",
    "fallback_models",
    "temperature",
    "workspace_overlay",
    "risk_profile",
    "as_tool",
    "coordinator",
    "system_prompt",
)


def agent_toml(spec: AgentSpec) -> str:
    """The TOML text of ``spec``; reading it back gives the same spec."""
    lines = [f"# Agent {spec.agent_id!r}. Exported by clawbot; one file per agent."]
    for key in _TOP_LEVEL:
        value = getattr(spec, key)
        if value is not None:
            lines.append(f"{key} = {_value(value)}")
    for table in ("tools", "skills"):
        policy = getattr(spec, table)
        lines += [
            "",
            f"[{table}]",
            f"allow = {_value(policy.allow)}",
            f"deny = {_value(policy.deny)}",
        ]
    context = spec.context.model_dump(exclude_none=True)
    lines += ["", "[context]", *(f"{k} = {_value(v)}" for k, v in context.items())]
    subagents = spec.subagents.model_dump(exclude_defaults=True)
    if subagents:
        lines += ["", "[subagents]", *(f"{k} = {_value(v)}" for k, v in subagents.items())]
    if spec.siblings:
        lines += ["", "[siblings]", *(f"{_key(k)} = {_value(v)}" for k, v in spec.siblings.items())]
    return "\n".join(lines) + "\n"


def write_agent_file(spec: AgentSpec, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{spec.agent_id}.toml"
    path.write_text(agent_toml(spec), encoding="utf-8")
    return path


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _key(key: str) -> str:
    """A table key: bare when TOML allows it (agent ids do), quoted otherwise (``*``)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _string(value: str) -> str:
    multiline_safe = (
        "\n" in value
        and "'''" not in value
        and not value.endswith("'")
        and not any((ch < " " and ch not in "\n\t") or ch == "\x7f" for ch in value)
    )
    if multiline_safe:
        # A literal multi-line string keeps a long prompt readable in Git.
        return "'''\n" + value + "'''"
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
