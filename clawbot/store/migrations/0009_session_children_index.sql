-- A session's children (the sessions it owns: subagents) are listed by /subagents, stopped
-- with their parent and drawn by `clawbot sessions tree`. Only child sessions have an owner,
-- so only they are indexed: chats with people never enter it.
CREATE INDEX sessions_by_owner ON sessions(owner_key, created_at) WHERE owner_key IS NOT NULL;
