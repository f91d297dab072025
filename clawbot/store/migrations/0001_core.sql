-- Sessions, their transcripts, turn jobs and the inbound dedup ledger.
CREATE TABLE sessions (
    key             TEXT PRIMARY KEY,
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    thread_id       TEXT,
    chat_type       TEXT NOT NULL DEFAULT 'dm',
    agent_id        TEXT NOT NULL,
    model_override  TEXT,
    deliver         INTEGER NOT NULL DEFAULT 1,
    owner_key       TEXT REFERENCES sessions(key) ON DELETE SET NULL,
    epoch           INTEGER NOT NULL DEFAULT 0,
    meta_json       TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key     TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    epoch           INTEGER NOT NULL,
    role            TEXT NOT NULL,
    content_json    TEXT NOT NULL,
    provenance_json TEXT NOT NULL,
    meta_json       TEXT NOT NULL DEFAULT '{}',
    turn_id         TEXT,
    created_at      TEXT NOT NULL
);
CREATE INDEX messages_by_session ON messages(session_key, epoch, id);
CREATE TABLE turn_jobs (
    id              TEXT PRIMARY KEY,
    session_key     TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    lane            TEXT NOT NULL DEFAULT 'main',
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    input_message_id INTEGER REFERENCES messages(id) ON DELETE SET NULL,
    error           TEXT,
    lease_until     TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX turn_jobs_by_status ON turn_jobs(status, lane);
CREATE TABLE inbound_seen (
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    session_key     TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    PRIMARY KEY (channel, chat_id, message_id)
);
