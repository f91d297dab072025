-- A session's children (its subagents), listed by /subagents and `clawbot sessions tree`.
CREATE INDEX sessions_by_owner ON sessions(owner_key, created_at) WHERE owner_key IS NOT NULL;
