"""PostgreSQL's migrations, numbered like SQLite's (``clawbot.store.migrations``): file N
here makes the change file N there makes, in PostgreSQL's terms, so the two read side by
side. Text is ``COLLATE "C"`` (byte order, as SQLite compares), times are ISO-8601 text as in
SQLite, so every query sorts and compares alike on both. ``clawbot_schema`` holds the number
of the last one applied (SQLite's ``PRAGMA user_version``)."""
