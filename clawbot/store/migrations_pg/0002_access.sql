-- Access: DM pairing requests and the senders the owner approved.
CREATE TABLE pairing_requests (
    channel         TEXT COLLATE "C" NOT NULL,
    code            TEXT COLLATE "C" NOT NULL,
    sender_id       TEXT COLLATE "C" NOT NULL,
    sender_name     TEXT COLLATE "C" NOT NULL DEFAULT '',
    chat_id         TEXT COLLATE "C" NOT NULL,
    status          TEXT COLLATE "C" NOT NULL DEFAULT 'pending',
    created_at      TEXT COLLATE "C" NOT NULL,
    expires_at      TEXT COLLATE "C" NOT NULL,
    decided_at      TEXT COLLATE "C",
    PRIMARY KEY (channel, code)
);
-- One pending code per sender: a sender who writes again gets the same code back.
CREATE UNIQUE INDEX pairing_one_pending_per_sender
    ON pairing_requests(channel, sender_id) WHERE status = 'pending';
CREATE TABLE approved_senders (
    channel         TEXT COLLATE "C" NOT NULL,
    sender_id       TEXT COLLATE "C" NOT NULL,
    sender_name     TEXT COLLATE "C" NOT NULL DEFAULT '',
    approved_at     TEXT COLLATE "C" NOT NULL,
    code            TEXT COLLATE "C",
    PRIMARY KEY (channel, sender_id)
);
