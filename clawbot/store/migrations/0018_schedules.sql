-- Scheduled tasks (docs/schedules.md): a prompt that runs as a TurnJob in the cron lane of
-- its session when due. ``kind`` and ``spec`` are the trigger (cron expression, interval
-- seconds, or the one-off time), ``tz`` the time zone a cron expression is read in.
-- ``next_run`` is the due time not yet claimed (NULL once a one-off ran); a due time is
-- claimed by the job it starts (the dedup ledger row ``schedule:<id>:<due>`` is written in
-- the job's transaction), so it runs once even across a crash. ``last_job`` is the job whose
-- outcome is not yet counted; ``failures`` the consecutive failed runs. ``mode``: the prompt
-- runs in the session itself, or in a fresh subagent whose announce reaches the session.
CREATE TABLE scheduled_tasks (
    id          TEXT PRIMARY KEY,
    session_key TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    agent_id    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('cron', 'interval', 'once')),
    spec        TEXT NOT NULL,
    tz          TEXT NOT NULL DEFAULT 'UTC',
    prompt      TEXT NOT NULL,
    mode        TEXT NOT NULL DEFAULT 'session' CHECK (mode IN ('session', 'subagent')),
    created_by  TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL CHECK (status IN ('active', 'paused', 'done', 'cancelled')),
    next_run    TEXT,
    failures    INTEGER NOT NULL DEFAULT 0,
    last_job    TEXT,
    last_run    TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX scheduled_tasks_due ON scheduled_tasks (next_run) WHERE status = 'active';
CREATE INDEX scheduled_tasks_session ON scheduled_tasks (session_key, status);
