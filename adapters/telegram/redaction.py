"""Keeping the bot token (and the webhook secret) out of the logs: PTB and httpx log request
URLs, which carry the token."""

from __future__ import annotations

import logging


class RedactToken(logging.Filter):
    """Scrubs the bot token from log records: PTB and httpx log request URLs, which carry it."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "<redacted>")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        clean = self.scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            formatted = logging.Formatter().formatException(record.exc_info)
            if self.scrub(formatted) != formatted:
                record.exc_text = self.scrub(formatted)
        return True


def library_loggers() -> list[logging.Logger]:
    """The loggers to scrub: the libraries' and this package's own (``adapters.telegram.*``)."""
    families = {"telegram", "httpx", "httpcore", "aiohttp"}
    own = __name__.rpartition(".")[0] + "."
    names = {"httpx", "httpcore", "aiohttp.server", "aiohttp.web"}
    names.update(
        name
        for name in logging.root.manager.loggerDict
        if name.split(".")[0] in families or name.startswith(own)
    )
    return [logging.getLogger(name) for name in sorted(names)]
