-- Scheduling: who runs a job and until when (lease), how its work was merged, whether its
-- reply went out, and the per-session backlog of deferred messages and resume tokens (and of
-- context messages held back until the running turn ends: kind 'context', no job).
ALTER TABLE turn_jobs ADD COLUMN owner TEXT;
ALTER TABLE turn_jobs ADD COLUMN merged_into TEXT;
ALTER TABLE turn_jobs ADD COLUMN reply_to TEXT;
ALTER TABLE turn_jobs ADD COLUMN replied INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turn_jobs ADD COLUMN started_at TEXT;
ALTER TABLE turn_jobs ADD COLUMN finished_at TEXT;
CREATE INDEX turn_jobs_by_runner ON turn_jobs(merged_into) WHERE merged_into IS NOT NULL;
CREATE TABLE backlog (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key     TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    job_id          TEXT REFERENCES turn_jobs(id) ON DELETE CASCADE,
    kind            TEXT NOT NULL,
    payload_json    TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX backlog_by_session ON backlog(session_key, id);
