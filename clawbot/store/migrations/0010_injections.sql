-- Injections: every message one session puts into another (a parent's task or follow-up for
-- its child, a child's announce to its parent), stored once under a deterministic
-- idempotency key. An injection into a child session also records that the turn it starts
-- owes the child's parent an announce (parent_key) and when that announce was written
-- (announced_at): set in the same transaction that writes the announce into the parent, so a
-- crash at any point reports a finished child turn once, never twice, never zero times.
CREATE TABLE injections (
    key             TEXT PRIMARY KEY,
    kind            TEXT NOT NULL,
    source_key      TEXT NOT NULL,
    target_key      TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    job_id          TEXT NOT NULL,
    hop             INTEGER NOT NULL,
    parent_key      TEXT,
    announced_at    TEXT,
    created_at      TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX injections_by_job ON injections(job_id);
CREATE INDEX injections_unannounced ON injections(job_id)
    WHERE parent_key IS NOT NULL AND announced_at IS NULL;
