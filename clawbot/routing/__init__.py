"""Routing: where every inbound message enters.

``router`` checks the input, finds the session for a chat, asks ``access`` who may talk
(``pairing`` codes for strangers), answers slash commands, and hands the rest to the
scheduler; ``sessions`` is the session record and its key (below the store); ``rate_limit``
is the per-sender flood limit (private to the router).

The top stage: it may import every stage below it. It never imports ``app``, ``cli`` or
``adapters``; ``sessions`` and ``pairing`` import only the foundation.
"""

__all__ = [
    "access",
    "pairing",
    "router",
    "sessions",
]
