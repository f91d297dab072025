"""The ``clawbot`` command.

``main`` is the Typer app (``main()`` is the console script); one module per command group:
``onboard``, ``chat``, ``run``, ``doctor``, ``agents``, ``pairing``, ``sessions``, ``memory``,
``audit``, ``usage``, with ``common`` (what they share) and ``checks`` (what ``doctor``
checks); ``service``
runs the adapters of ``clawbot run`` (public: the conformance suite runs a channel through
it) and ``serving`` is the one-serving-process lock. ``onboard`` asks what
``clawbot.setup`` checks and writes (the web console's first run uses it too).

On top: it may import every package of clawbot, never ``adapters`` (they are loaded by
their ``clawbot.adapters`` entry point).
"""

__all__ = [
    "main",
    "service",
]
