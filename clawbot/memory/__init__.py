"""Memories: texts agents keep under a key, searchable across conversations.

``records`` holds the records and checks (keys, namespaces, references; below the store);
``recall`` the ``[Context: memory]`` block of a turn; ``files`` export and import; semantic
recall's ``embeddings`` (the models), ``chunks`` and ``ranking`` (pure, used by the store).
The store is ``clawbot.store.memories`` and ``memory_vectors``, the tools
``clawbot.tools.memory``, the command ``clawbot.commands.memory``.

It sits above the runtime (recall is a turn plug-in; embeddings call litellm through
``clawbot.providers``, and the store reaches them through its ``Embedder`` protocol, given
to ``open_store`` from above) and never imports ``scheduling``, ``subagents``, ``commands``,
``routing``, ``app``, ``cli`` or ``adapters``.
"""

__all__ = [
    "chunks",
    "embeddings",
    "files",
    "ranking",
    "recall",
    "records",
]
