-- The web console's logins (see SQLite's 0020 and docs/console.md): hashes only.
CREATE TABLE console_token (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    token_hash  TEXT COLLATE "C" NOT NULL,
    created_at  TEXT COLLATE "C" NOT NULL
);
CREATE TABLE console_logins (
    session_hash TEXT COLLATE "C" PRIMARY KEY,
    csrf_token   TEXT COLLATE "C" NOT NULL,
    created_at   TEXT COLLATE "C" NOT NULL,
    expires_at   TEXT COLLATE "C" NOT NULL
);
CREATE INDEX audit_by_run ON audit(run_id, id);
