-- Several clawbot processes on one database (docs/postgres.md): each session's turns run in
-- one process at a time, its owner; a message another process takes in is stored there and
-- handed over (LISTEN/NOTIFY). A process renews its row while it lives; the sessions of one
-- whose row expired are taken over by another.
CREATE TABLE clawbot_processes (
    owner       TEXT COLLATE "C" PRIMARY KEY,
    alive_until TIMESTAMPTZ NOT NULL
);
CREATE TABLE session_owners (
    session_key TEXT COLLATE "C" PRIMARY KEY,
    owner       TEXT COLLATE "C" NOT NULL,
    claimed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX session_owners_by_owner ON session_owners(owner);
