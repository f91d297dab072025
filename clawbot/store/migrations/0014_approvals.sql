-- Approval requests and capability grants.
-- An approval is asked in the chat of the root session (a subagent's request goes to the
-- person at the top of its chain) and answered there; call_key (the session, the turn and
-- the call's tool and arguments) finds the request again when the turn is re-run after a
-- restart, so it is asked once and stays answerable. expires_at is when no answer counts
-- as a denial.
CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    call_key     TEXT NOT NULL UNIQUE,
    session_key  TEXT NOT NULL,
    root_key     TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    trace_id     TEXT NOT NULL,
    tool         TEXT NOT NULL,
    resource     TEXT,
    risk         TEXT NOT NULL,
    chain        TEXT NOT NULL,
    summary      TEXT NOT NULL,
    status       TEXT NOT NULL,
    scope        TEXT,
    answered_by  TEXT,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    answered_at  TEXT
);
CREATE INDEX approvals_by_root ON approvals(root_key, status);
-- A grant lets a guarded tool run without asking: for the rest of a run (an "approve once"
-- of one resource, revoked when the run ends) or of a session (until /new, which moves the
-- root session to a new epoch, or /grants clear).
CREATE TABLE grants (
    id           INTEGER PRIMARY KEY,
    session_key  TEXT NOT NULL,
    root_key     TEXT NOT NULL,
    root_epoch   INTEGER NOT NULL,
    tool         TEXT NOT NULL,
    resource     TEXT,
    scope        TEXT NOT NULL,
    run_id       TEXT,
    approval_id  TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX grants_by_session ON grants(session_key, tool);
CREATE INDEX grants_by_root ON grants(root_key);
