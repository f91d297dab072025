-- Semantic recall (docs/memory.md): the vectors of each memory's pieces (a long text is cut
-- along its headings and paragraphs), float32 little-endian in a BLOB, with the model that
-- made them (vectors of another model are made again). Searched in memory, not by SQLite:
-- each process keeps a matrix of them, and memory_vectors_version, bumped by every vector
-- written or deleted, tells it when another process changed them. A memory whose key, text or
-- tags change, or that is deleted, loses its vectors here, whoever wrote it.
CREATE TABLE memory_vectors (
    id        INTEGER PRIMARY KEY,
    memory_id INTEGER NOT NULL,
    chunk     INTEGER NOT NULL,
    model     TEXT NOT NULL,
    vector    BLOB NOT NULL,
    UNIQUE (memory_id, chunk)
);
CREATE TABLE memory_vectors_version (n INTEGER NOT NULL);
INSERT INTO memory_vectors_version (n) VALUES (0);
CREATE TRIGGER memory_vectors_stale AFTER UPDATE OF key, text, tags ON memories BEGIN
    DELETE FROM memory_vectors WHERE memory_id = old.id;
END;
CREATE TRIGGER memory_vectors_gone AFTER DELETE ON memories BEGIN
    DELETE FROM memory_vectors WHERE memory_id = old.id;
END;
CREATE TRIGGER memory_vectors_added AFTER INSERT ON memory_vectors BEGIN
    UPDATE memory_vectors_version SET n = n + 1;
END;
CREATE TRIGGER memory_vectors_removed AFTER DELETE ON memory_vectors BEGIN
    UPDATE memory_vectors_version SET n = n + 1;
END;
