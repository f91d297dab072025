-- The round of tool calls a turn waited in for an approval (the model's reply and the
-- results of the calls that ran before the waiting one), saved with the request as JSON
-- masked like a transcript row: a turn resumed after a restart continues from it instead
-- of asking the model again (see clawbot.paused_rounds). Cleared once the round is in the
-- transcript; the partial index holds only the rounds still saved.
ALTER TABLE approvals ADD COLUMN round_json TEXT;
CREATE INDEX approvals_paused ON approvals(turn_id, created_at) WHERE round_json IS NOT NULL;
