-- The usage ledger: one row per call to a paid model (a turn's or a subagent's model call,
-- a compaction's summary, an embedding, a transcription, a speech synthesis), written when
-- the call ended, whatever its outcome. root_key is the conversation a subagent's session
-- rolls up to (its own key for a person's session); chain the agents from the root down
-- ("main>coder"). Tokens and cost are NULL when unknown (a provider that counted nothing, a
-- model litellm has no price for), never a made-up 0. Cost is kept in billionths of a dollar
-- (integers), so totals add up exactly to the rows. day is at's UTC date, for the
-- per-day totals and budgets.
CREATE TABLE usage (
    id            INTEGER PRIMARY KEY,
    at            TEXT NOT NULL,
    day           TEXT NOT NULL,
    session_key   TEXT,
    agent_id      TEXT,
    chain         TEXT,
    root_key      TEXT,
    turn_id       TEXT,
    purpose       TEXT NOT NULL,
    model         TEXT NOT NULL,
    provider      TEXT NOT NULL,
    input_tokens  INTEGER,
    cached_tokens INTEGER,
    output_tokens INTEGER,
    cost_nanousd  INTEGER,
    latency_ms    REAL NOT NULL,
    outcome       TEXT NOT NULL
);
CREATE INDEX usage_by_day ON usage(day);
CREATE INDEX usage_by_root ON usage(root_key, day);
CREATE INDEX usage_by_session ON usage(session_key);
