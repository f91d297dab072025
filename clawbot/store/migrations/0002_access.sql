-- Access: DM pairing requests and the senders the owner approved.
CREATE TABLE pairing_requests (
    channel         TEXT NOT NULL,
    code            TEXT NOT NULL,
    sender_id       TEXT NOT NULL,
    sender_name     TEXT NOT NULL DEFAULT '',
    chat_id         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending',
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    decided_at      TEXT,
    PRIMARY KEY (channel, code)
);
-- One pending code per sender: a sender who writes again gets the same code back.
CREATE UNIQUE INDEX pairing_one_pending_per_sender
    ON pairing_requests(channel, sender_id) WHERE status = 'pending';
CREATE TABLE approved_senders (
    channel         TEXT NOT NULL,
    sender_id       TEXT NOT NULL,
    sender_name     TEXT NOT NULL DEFAULT '',
    approved_at     TEXT NOT NULL,
    code            TEXT,
    PRIMARY KEY (channel, sender_id)
);
