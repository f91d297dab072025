"""The protocols of the store's repositories, one module per family of tables; the
:class:`~clawbot.store.interface.Store` holds one of each. Nothing here names SQLite, and
nothing here imports a backend (``clawbot.store.sqlite`` and the table modules)."""

__all__ = ["agents", "conversations", "memories", "security", "senders", "turns"]
