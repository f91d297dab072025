-- Fewer pages written per turn: every page a transaction changes is one more frame in the
-- WAL. Messages drop AUTOINCREMENT (which rewrote sqlite_sequence on every insert; a message
-- id is never reused while anything refers to it, since references are cleared on delete),
-- and turn_jobs is clustered on its id (WITHOUT ROWID: no separate primary-key index).
-- Rebuilt the documented way (create, copy, drop, rename) with foreign keys off.
CREATE TABLE messages_new (
    id              INTEGER PRIMARY KEY,
    session_key     TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    epoch           INTEGER NOT NULL,
    role            TEXT NOT NULL,
    content_json    TEXT NOT NULL,
    provenance_json TEXT NOT NULL,
    meta_json       TEXT NOT NULL DEFAULT '{}',
    turn_id         TEXT,
    created_at      TEXT NOT NULL
);
INSERT INTO messages_new (id, session_key, epoch, role, content_json, provenance_json,
                          meta_json, turn_id, created_at)
    SELECT id, session_key, epoch, role, content_json, provenance_json, meta_json, turn_id,
           created_at
    FROM messages;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_by_session ON messages(session_key, epoch, id);
DELETE FROM sqlite_sequence WHERE name = 'messages';

CREATE TABLE turn_jobs_new (
    id              TEXT PRIMARY KEY,
    session_key     TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    lane            TEXT NOT NULL DEFAULT 'main',
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    input_message_id INTEGER REFERENCES messages(id) ON DELETE SET NULL,
    error           TEXT,
    lease_until     TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    owner           TEXT,
    merged_into     TEXT,
    reply_to        TEXT,
    replied         INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT,
    finished_at     TEXT
) WITHOUT ROWID;
INSERT INTO turn_jobs_new (id, session_key, lane, status, attempts, input_message_id, error,
                           lease_until, created_at, updated_at, owner, merged_into, reply_to,
                           replied, started_at, finished_at)
    SELECT id, session_key, lane, status, attempts, input_message_id, error, lease_until,
           created_at, updated_at, owner, merged_into, reply_to, replied, started_at,
           finished_at
    FROM turn_jobs;
DROP TABLE turn_jobs;
ALTER TABLE turn_jobs_new RENAME TO turn_jobs;
CREATE INDEX turn_jobs_by_status ON turn_jobs(status, lane);
CREATE INDEX turn_jobs_by_runner ON turn_jobs(merged_into) WHERE merged_into IS NOT NULL;
