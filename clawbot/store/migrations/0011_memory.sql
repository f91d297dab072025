-- Memories: what agents keep between conversations, in the same database as everything else.
-- A memory is a text under a key, unique within its namespace (the agent id that owns it, see
-- docs/memory.md), with tags and the session and agent that wrote it. memories_fts indexes
-- key, text and tags for full-text search ranked with bm25; it is an external-content FTS5
-- table (the text is stored once, in memories) kept in step by the triggers below, so every
-- writer (the tools, `clawbot memory import`, a second process) keeps it right.
CREATE TABLE memories (
    id          INTEGER PRIMARY KEY,
    namespace   TEXT NOT NULL,
    key         TEXT NOT NULL,
    text        TEXT NOT NULL,
    tags        TEXT NOT NULL DEFAULT '',
    session_key TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    UNIQUE (namespace, key)
);
CREATE INDEX memories_by_session ON memories(session_key, updated_at);
CREATE VIRTUAL TABLE memories_fts USING fts5(
    key, text, tags,
    content = 'memories', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, key, text, tags) VALUES (new.id, new.key, new.text, new.tags);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, text, tags)
        VALUES ('delete', old.id, old.key, old.text, old.tags);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF key, text, tags ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, text, tags)
        VALUES ('delete', old.id, old.key, old.text, old.tags);
    INSERT INTO memories_fts (rowid, key, text, tags) VALUES (new.id, new.key, new.text, new.tags);
END;
