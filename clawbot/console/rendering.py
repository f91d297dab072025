"""The console's HTML: Jinja templates shipped in the package, autoescaped everywhere (a
``<script>`` in a transcript, an agent's name or a memory is shown as text, never run),
and the list of pages its navigation shows, which a new page joins with one line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from clawbot.console.auth import CSRF_FIELD, operator_of


@dataclass(frozen=True)
class Page:
    """An entry of the navigation: its address and its name."""

    path: str
    title: str


PAGES: tuple[Page, ...] = (
    Page("/", "Sessions"),
    Page("/trees", "Subagents"),
    Page("/audit", "Audit"),
    Page("/approvals", "Approvals"),
    Page("/agents", "Agents"),
    Page("/memory", "Memory"),
    Page("/schedules", "Schedules"),
    Page("/usage", "Usage"),
    Page("/logs", "Logs"),
)
"""A new page joins the navigation here."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""Only the console's own scripts run: even text that escaped escaping could not."""


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


environment = jinja2.Environment(
    loader=jinja2.PackageLoader("clawbot.console", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
environment.filters["when"] = _when


def render(request: Request, template: str, status_code: int = 200, **values: Any) -> HTMLResponse:
    """``template`` with ``values``, the navigation and this login's CSRF token."""
    html = environment.get_template(template).render(
        pages=PAGES,
        path=request.url.path,
        csrf_field=CSRF_FIELD,
        csrf_token=operator_of(request).csrf_token,
        **values,
    )
    return HTMLResponse(html, status_code=status_code)


def fragment(template: str, **values: Any) -> str:
    """A piece of a page (a live tree's body), for a server-sent event."""
    return environment.get_template(template).render(**values)


def security_headers() -> dict[str, str]:
    return {
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cache-control": "no-store",
    }
