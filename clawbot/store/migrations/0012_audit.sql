-- Audit records: one row per tool call (and, later, per approval), written when the call
-- starts and completed when it ends, so a call that never ended (a crash, a kill) still
-- shows. trace_id ties together everything one person's message set off, across
-- subagents; task_id is what the session works on (the person's message for a chat, the
-- spawned task for a subagent); run_id is the turn, step_id the tool round within it.
-- Arguments are stored with secrets masked; capabilities are JSON lists such as
-- ["tool:file_write", "path:notes/todo.md"].
CREATE TABLE audit (
    id                INTEGER PRIMARY KEY,
    kind              TEXT NOT NULL,
    trace_id          TEXT NOT NULL,
    task_id           TEXT NOT NULL,
    run_id            TEXT NOT NULL,
    step_id           TEXT NOT NULL,
    session_key       TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    tool              TEXT NOT NULL,
    arguments_json    TEXT NOT NULL DEFAULT '{}',
    requested_json    TEXT NOT NULL DEFAULT '[]',
    granted_json      TEXT NOT NULL DEFAULT '[]',
    approval_required INTEGER NOT NULL DEFAULT 0,
    approval_result   TEXT,
    started_at        TEXT NOT NULL,
    ended_at          TEXT,
    status            TEXT NOT NULL,
    error             TEXT
);
CREATE INDEX audit_by_trace ON audit(trace_id, id);
