-- The inbound dedup ledger (platform message ids already taken) is clustered on its key
-- (WITHOUT ROWID): a rowid table kept a second B-tree for the key, so every platform message
-- wrote one more page and the ledger took twice the space. Rebuilt the documented way
-- (create, copy, drop, rename); nothing refers to it. Old ids are now forgotten after a
-- retention far longer than any platform redelivers (Store.forget_seen), so it stays bounded.
CREATE TABLE inbound_seen_new (
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    session_key     TEXT NOT NULL,
    received_at     TEXT NOT NULL,
    PRIMARY KEY (channel, chat_id, message_id)
) WITHOUT ROWID;
INSERT INTO inbound_seen_new (channel, chat_id, message_id, session_key, received_at)
    SELECT channel, chat_id, message_id, session_key, received_at FROM inbound_seen;
DROP TABLE inbound_seen;
ALTER TABLE inbound_seen_new RENAME TO inbound_seen;
