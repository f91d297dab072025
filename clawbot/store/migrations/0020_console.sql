-- The web console's logins (clawbot console): the login token of the console that started
-- last (one row; a new start replaces it), and the browser sessions it opened. Only hashes
-- are stored (SHA-256 of the token, of the session cookie): a copy of the database logs
-- nobody in. Each session has its own CSRF token, which every form posts back.
CREATE TABLE console_token (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    token_hash  TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TABLE console_logins (
    session_hash TEXT PRIMARY KEY,
    csrf_token   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL
);
-- A conversation's page in the console reads the audit records of the turns it shows
-- (their tool calls, the ephemeral blocks each turn's model saw).
CREATE INDEX audit_by_run ON audit(run_id, id);
