-- Injections: every message one session puts into another, stored once under a
-- deterministic idempotency key (see SQLite's 0010).
CREATE TABLE injections (
    key             TEXT COLLATE "C" PRIMARY KEY,
    kind            TEXT COLLATE "C" NOT NULL,
    source_key      TEXT COLLATE "C" NOT NULL,
    target_key      TEXT COLLATE "C" NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    job_id          TEXT COLLATE "C" NOT NULL,
    hop             INTEGER NOT NULL,
    parent_key      TEXT COLLATE "C",
    announced_at    TEXT COLLATE "C",
    created_at      TEXT COLLATE "C" NOT NULL
);
CREATE INDEX injections_by_job ON injections(job_id);
CREATE INDEX injections_unannounced ON injections(job_id)
    WHERE parent_key IS NOT NULL AND announced_at IS NULL;
