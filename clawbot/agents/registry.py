"""The agent registry: every AgentSpec, stored in the database and kept in memory.

At start-up the ``agents/`` folder seeds and updates it: a file is applied when it is new or
was edited since it was last applied, so changes made from chat survive restarts until the
file changes. A broken file is reported and skipped; the other agents still load. ``main``
always exists.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawbot.agents.files import agent_toml, content_hash, load_agent_folder, write_agent_file
from clawbot.agents.profiles import (
    DEFAULT_AGENT,
    DEFAULT_AGENT_ID,
    AgentRecord,
    AgentSpec,
    spec_problems,
)
from clawbot.store import Store

log = logging.getLogger("clawbot.agents")

DRAFT_REQUIRED = {
    "name": "a short unique name, e.g. 'Translator'",
    "description": "one sentence: what the agent is for",
    "system_prompt": "how the agent should behave, in a few sentences",
}
_NESTED = ("tools", "skills", "context")


@dataclass(frozen=True)
class DraftReview:
    """A checked draft: the spec when it validates, else what is missing or wrong."""

    spec: AgentSpec | None
    missing: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()

    @property
    def problems(self) -> str:
        parts = []
        if self.missing:
            parts.append("missing: " + "; ".join(self.missing))
        if self.invalid:
            parts.append("wrong: " + "; ".join(self.invalid))
        return ". ".join(parts)


class AgentRegistry:
    def __init__(
        self,
        store: Store,
        records: Iterable[AgentRecord] = (),
        *,
        folder: Path | None = None,
    ) -> None:
        self.store = store
        self.folder = folder
        self.problems: tuple[str, ...] = ()
        self._records = {record.spec.agent_id: record for record in records}
        self.listeners: list[Callable[[], None]] = []
        """Called after an agent is saved (agents offered as tools follow the change)."""

    @classmethod
    async def open(cls, store: Store, folder: Path | None) -> AgentRegistry:
        """Load the stored agents, apply the folder's new or edited files, ensure ``main``."""
        registry = cls(store, await store.agents.list(), folder=folder)
        if folder is not None:
            await registry.sync_folder(folder)
        if DEFAULT_AGENT_ID not in registry._records:
            await registry._save(AgentRecord(spec=DEFAULT_AGENT, source="builtin"))
        return registry

    async def sync_folder(self, folder: Path) -> tuple[str, ...]:
        files, problems = load_agent_folder(folder)
        for item in files:
            spec = item.spec
            current = self._records.get(spec.agent_id)
            if current is not None and current.file_hash == item.content_hash:
                continue
            owner = self._name_owner(spec.name, other_than=spec.agent_id)
            if owner is not None:
                problems.append(
                    f"{item.path.name}: name {spec.name!r} is already used by agent "
                    f"{owner.agent_id!r} — give one of them another name"
                )
                continue
            await self._save(AgentRecord(spec=spec, source="file", file_hash=item.content_hash))
            log.info("agent %s loaded from %s", spec.agent_id, item.path.name)
        for problem in problems:
            log.warning("agent file skipped: %s", problem)
        self.problems = tuple(problems)
        return self.problems

    # lookup ---------------------------------------------------------------------------

    def get(self, agent_id: str) -> AgentSpec:
        """The agent a session names; ``main`` when it no longer exists."""
        record = self._records.get(agent_id)
        if record is None:
            log.warning("unknown agent %r: using %s", agent_id, DEFAULT_AGENT_ID)
            record = self._records.get(DEFAULT_AGENT_ID)
            return record.spec if record else DEFAULT_AGENT
        return record.spec

    def find(self, agent_id: str) -> AgentSpec | None:
        record = self._records.get(agent_id)
        return record.spec if record else None

    def record(self, agent_id: str) -> AgentRecord | None:
        return self._records.get(agent_id)

    def all(self) -> list[AgentSpec]:
        """Every agent, ``main`` first, then by id."""
        return sorted(
            (r.spec for r in self._records.values()),
            key=lambda s: (s.agent_id != DEFAULT_AGENT_ID, s.agent_id),
        )

    def exact(self, ref: str) -> AgentSpec | None:
        """The agent whose id is ``ref``, or whose name is ``ref`` ignoring case."""
        ref = ref.strip()
        if ref in self._records:
            return self._records[ref].spec
        return self._name_owner(ref)

    def suggest(self, ref: str, limit: int = 3) -> list[AgentSpec]:
        """Agents whose id or name is close to ``ref``, best first."""
        ref = ref.strip().casefold()
        labels: dict[str, AgentSpec] = {}
        for spec in self.all():
            labels.setdefault(spec.agent_id.casefold(), spec)
            labels.setdefault(spec.name.casefold(), spec)
        found: list[AgentSpec] = []
        for label in difflib.get_close_matches(ref, list(labels), n=limit * 2, cutoff=0.6):
            if labels[label] not in found:
                found.append(labels[label])
        for label, spec in labels.items():
            if ref and (label.startswith(ref) or ref in label) and spec not in found:
                found.append(spec)
        return found[:limit]

    def fuzzy(self, ref: str) -> tuple[AgentSpec | None, list[AgentSpec]]:
        """An exact match, else the one near match; otherwise (None, the candidates)."""
        exact = self.exact(ref)
        if exact is not None:
            return exact, []
        candidates = self.suggest(ref)
        if len(candidates) == 1:
            return candidates[0], []
        return None, candidates

    def _name_owner(self, name: str, *, other_than: str | None = None) -> AgentSpec | None:
        wanted = name.strip().casefold()
        for record in self._records.values():
            spec = record.spec
            if spec.name.casefold() == wanted and spec.agent_id != other_than:
                return spec
        return None

    # changes --------------------------------------------------------------------------

    def review_draft(
        self, draft: Mapping[str, Any], *, updating: AgentSpec | None = None
    ) -> DraftReview:
        """Check a new agent's draft (or a patch of ``updating``) without writing anything."""
        missing: dict[str, str] = {}
        if updating is None:
            data = dict(draft)
            if not data.get("agent_id") and isinstance(data.get("name"), str):
                data.pop("agent_id", None)
                if _slug(data["name"]):
                    data["agent_id"] = _slug(data["name"])
            missing = {key: why for key, why in DRAFT_REQUIRED.items() if not _given(data.get(key))}
            if _given(data.get("name")) and not data.get("agent_id"):
                missing["agent_id"] = "a short id: lowercase letters, digits, '-' or '_'"
        else:
            if "agent_id" in draft and draft["agent_id"] != updating.agent_id:
                return DraftReview(spec=None, invalid=("agent_id: an agent's id cannot change",))
            data = updating.model_dump()
            for key, value in draft.items():
                if key in _NESTED and isinstance(value, Mapping):
                    data[key] = {**data[key], **value}
                else:
                    data[key] = value
        invalid: list[str] = []
        spec: AgentSpec | None = None
        try:
            spec = AgentSpec.model_validate(data)
        except ValidationError as exc:
            for loc, kind, message in spec_problems(exc):
                if kind == "missing" or (loc and loc[0] in missing):
                    continue
                invalid.append(f"{'.'.join(loc) or 'draft'}: {message}")
        if spec is not None:
            if updating is None and spec.agent_id in self._records:
                invalid.append(
                    f"agent_id: {spec.agent_id!r} already exists (use agent_update to change it)"
                )
            owner = self._name_owner(
                spec.name, other_than=spec.agent_id if updating is not None else None
            )
            if owner is not None:
                invalid.append(f"name: {spec.name!r} is already used by agent {owner.agent_id!r}")
        if missing or invalid:
            listed = tuple(f"{key} ({why})" for key, why in missing.items())
            return DraftReview(spec=None, missing=listed, invalid=tuple(invalid))
        return DraftReview(spec=spec)

    async def create(self, spec: AgentSpec) -> AgentSpec:
        await self._save(AgentRecord(spec=spec, source="chat"))
        return spec

    async def update(self, spec: AgentSpec) -> AgentSpec:
        """Replace a stored agent; the file hash is kept, so only a later file edit wins."""
        current = self._records.get(spec.agent_id)
        file_hash = current.file_hash if current else None
        await self._save(AgentRecord(spec=spec, source="chat", file_hash=file_hash))
        return spec

    async def export(self, folder: Path) -> list[Path]:
        """Write every agent to ``folder/<agent_id>.toml``.

        Exporting into the registry's own folder records the files as applied, so the next
        start does not mistake them for edits.
        """
        own = self.folder is not None and folder.resolve() == self.folder.resolve()
        paths = []
        for spec in self.all():
            path = write_agent_file(spec, folder)
            paths.append(path)
            if own:
                record = self._records[spec.agent_id]
                written = content_hash(agent_toml(spec).encode("utf-8"))
                await self._save(AgentRecord(spec=spec, source=record.source, file_hash=written))
        return paths

    async def _save(self, record: AgentRecord) -> None:
        await self.store.agents.save(record)
        self._records[record.spec.agent_id] = record
        for listener in self.listeners:
            listener()


def _given(value: Any) -> bool:
    return value is not None and (not isinstance(value, str) or bool(value.strip()))


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_\-]+", "-", name.strip().lower()).strip("-_")
    return slug[:40]
