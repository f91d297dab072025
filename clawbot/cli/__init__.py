"""The ``clawbot`` command.

``main`` is the Typer app (``main()`` is the console script); one module per command group:
``chat``, ``run``, ``doctor``, ``agents``, ``pairing``, ``sessions``, ``memory``, ``audit``,
``usage``,
with ``common`` (what they share) and ``checks`` (what ``doctor`` checks); ``service``
runs the adapters of ``clawbot run`` (public: the conformance suite runs a channel through
it) and ``serving`` is the one-serving-process lock. ``onboard_checks`` and ``home_files``
(what ``onboard`` checks and writes) are public: the web console's first run does the same.

On top: it may import every package of clawbot, never ``adapters`` (they are loaded by
their ``clawbot.adapters`` entry point).
"""

__all__ = [
    "home_files",
    "main",
    "onboard_checks",
    "service",
]
