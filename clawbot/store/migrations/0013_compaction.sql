-- Compaction: the older part of a conversation summarized into one message the model sees
-- in its place. The originals stay in `messages`, marked with the compaction that summarized
-- them (compaction_id), so history and audits still read them; the model's context is the
-- latest compaction's summary plus the messages no compaction has marked.
CREATE TABLE compactions (
    id           INTEGER PRIMARY KEY,
    session_key  TEXT NOT NULL REFERENCES sessions(key) ON DELETE CASCADE,
    epoch        INTEGER NOT NULL,
    summary      TEXT NOT NULL,
    through_id   INTEGER NOT NULL,
    messages     INTEGER NOT NULL,
    trigger      TEXT NOT NULL,
    instructions TEXT NOT NULL DEFAULT '',
    model        TEXT NOT NULL,
    meta_json    TEXT NOT NULL DEFAULT '{}',
    created_at   TEXT NOT NULL
);
CREATE INDEX compactions_by_session ON compactions(session_key, epoch, id);
ALTER TABLE messages ADD COLUMN compaction_id INTEGER;
