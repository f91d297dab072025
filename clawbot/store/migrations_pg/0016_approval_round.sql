-- The round of tool calls a turn waited in for an approval, saved with the request (see
-- SQLite's 0016); the partial index holds only the rounds still saved.
ALTER TABLE approvals ADD COLUMN round_json TEXT;
CREATE INDEX approvals_paused ON approvals(turn_id, created_at) WHERE round_json IS NOT NULL;
