"""The web console: an operator's view of the bot in a browser (``clawbot console``,
``clawbot run --console``). One module per page or concept; templates and the vendored
htmx in the package, so nothing is built or fetched at run time (docs/console.md).

Public: ``server`` (where it may listen, and serving it), ``context`` (what its pages read
and change) and ``logtail`` (the log lines it shows). On top, beside ``cli``: it may
import every stage, never ``cli`` or ``adapters``."""

__all__ = [
    "context",
    "logtail",
    "server",
]
