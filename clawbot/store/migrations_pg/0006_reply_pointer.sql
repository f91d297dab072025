-- A finished turn points at its final answer, so sending a reply again after a crash reads
-- one row by key instead of searching every message for the turn's id.
ALTER TABLE turn_jobs ADD COLUMN reply_message_id BIGINT REFERENCES messages(id) ON DELETE SET NULL;
