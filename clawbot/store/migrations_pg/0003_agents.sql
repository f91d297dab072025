-- Agent profiles (AgentSpec): seeded and updated from the agents/ folder, editable from chat.
-- file_hash is the hash of the agents/<id>.toml content last applied (NULL: never from a file).
CREATE TABLE agent_specs (
    agent_id        TEXT COLLATE "C" PRIMARY KEY,
    name            TEXT COLLATE "C" NOT NULL,
    config_json     TEXT NOT NULL,
    source          TEXT COLLATE "C" NOT NULL,
    file_hash       TEXT COLLATE "C",
    created_at      TEXT COLLATE "C" NOT NULL,
    updated_at      TEXT COLLATE "C" NOT NULL
);
CREATE INDEX agent_specs_by_name ON agent_specs(name);
