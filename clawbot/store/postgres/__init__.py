"""The store on PostgreSQL (``CLAWBOT_DATABASE_URL=postgresql://...``): the same repositories
as SQLite's over a psycopg connection, their SQL rewritten where the dialects differ
(``dialect``), PostgreSQL's own migrations (``clawbot.store.migrations_pg``) and full-text
search for memories (``search``). Needs the ``postgres`` extra (psycopg); importing this
package without it raises ImportError, which :func:`clawbot.store.open_store` turns into a
clear StoreError."""
