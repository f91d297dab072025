-- Agent profiles (AgentSpec): seeded and updated from the agents/ folder, editable from chat.
-- file_hash is the hash of the agents/<id>.toml content last applied (NULL: never from a file).
CREATE TABLE agent_specs (
    agent_id        TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    config_json     TEXT NOT NULL,
    source          TEXT NOT NULL,
    file_hash       TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX agent_specs_by_name ON agent_specs(name);
