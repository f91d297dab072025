"""The web console: an operator's view of the bot in a browser (``clawbot console``,
``clawbot run --console``). One module per page or concept; templates and the vendored
htmx in the package, so nothing is built or fetched at run time (docs/console.md)."""
