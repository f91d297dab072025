"""Agent profiles (``agent_specs``): seeded and updated from the agents/ folder, editable
from chat."""

from __future__ import annotations

import builtins

from clawbot.agents.profiles import AgentRecord, AgentSpec
from clawbot.store.rows import now
from clawbot.store.sql import SqlDatabase


class SqlAgents:
    """The stored agent profiles."""

    def __init__(self, database: SqlDatabase) -> None:
        self._database = database

    async def list(self) -> builtins.list[AgentRecord]:
        """Every stored profile, by agent id."""
        rows = await self._database.fetchall(
            "SELECT config_json, source, file_hash FROM agent_specs ORDER BY agent_id"
        )
        return [
            AgentRecord(spec=AgentSpec.model_validate_json(config), source=source, file_hash=hash_)
            for config, source, hash_ in rows
        ]

    async def save(self, record: AgentRecord) -> None:
        """Insert or replace one agent profile."""
        stamp = now()
        spec = record.spec
        await self._database.write(
            "INSERT INTO agent_specs (agent_id, name, config_json, source, file_hash,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (agent_id) DO UPDATE SET name = excluded.name,"
            " config_json = excluded.config_json, source = excluded.source,"
            " file_hash = excluded.file_hash, updated_at = excluded.updated_at",
            (
                spec.agent_id,
                spec.name,
                spec.model_dump_json(),
                record.source,
                record.file_hash,
                stamp,
                stamp,
            ),
        )
