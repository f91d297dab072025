-- Scheduled tasks (see SQLite's 0018 and docs/schedules.md).
CREATE TABLE scheduled_tasks (
    id          TEXT COLLATE "C" PRIMARY KEY,
    session_key TEXT COLLATE "C" NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    agent_id    TEXT COLLATE "C" NOT NULL,
    kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('cron', 'interval', 'once')),
    spec        TEXT NOT NULL,
    tz          TEXT COLLATE "C" NOT NULL DEFAULT 'UTC',
    prompt      TEXT NOT NULL,
    mode        TEXT COLLATE "C" NOT NULL DEFAULT 'session' CHECK (mode IN ('session', 'subagent')),
    created_by  TEXT COLLATE "C" NOT NULL DEFAULT '',
    status      TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'paused', 'done', 'cancelled')),
    next_run    TEXT COLLATE "C",
    failures    INTEGER NOT NULL DEFAULT 0,
    last_job    TEXT COLLATE "C",
    last_run    TEXT COLLATE "C",
    created_at  TEXT COLLATE "C" NOT NULL,
    updated_at  TEXT COLLATE "C" NOT NULL
);
CREATE INDEX scheduled_tasks_due ON scheduled_tasks (next_run) WHERE status = 'active';
CREATE INDEX scheduled_tasks_session ON scheduled_tasks (session_key, status);
