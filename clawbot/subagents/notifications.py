"""Task notifications: how a worker's report reaches a coordinator's model.

A coordinator (an agent with ``coordinator = true``) sees each announce of its workers as a
``<task-notification>`` XML element instead of the ``[Context: subagent_announce]`` block:
a structure it can take apart reliably when many workers report at once. Like the block it
is rendered from the announce payload for the turn that answers it, never stored.

Every text that comes from a worker is escaped, and characters XML cannot hold at all are
replaced, so a result that contains ``</result>`` or a control character cannot change the
structure.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import escape

from clawbot.routing.sessions import child_id_of
from clawbot.subagents.records import AnnouncePayload, AnnounceStatus

STATUS_WORDS: dict[AnnounceStatus, str] = {
    "ok": "completed",
    "error": "failed",
    "timeout": "timeout",
    "cancelled": "cancelled",
}
"""A report's status as the notification says it (Claude Code's words where it has them)."""

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold, escaped or not (NUL, most control characters)."""


def xml_text(value: str) -> str:
    """``value`` as the content of an XML element: escaped, impossible characters replaced."""
    return escape(_NOT_XML.sub("\ufffd", value))


def _element(tag: str, value: str | int) -> str:
    return f"<{tag}>{xml_text(str(value))}</{tag}>"


def task_notification(payload: AnnouncePayload) -> str:
    """The ``<task-notification>`` of one worker's report. ``task-id`` is the worker's id,
    what ``sessions_send`` and ``sessions_stop`` take; usage figures that are unknown (an
    older report, a provider that gives no usage, a model without a price) are left out."""
    task_id = child_id_of(payload.source_session_key) or payload.source_session_key
    status = STATUS_WORDS[payload.result.status]
    summary = f"{payload.source_agent_name} worker {task_id} ({payload.task.label!r}): {status}"
    lines = [
        "<task-notification>",
        _element("task-id", task_id),
        _element("agent", payload.source_agent_id),
        _element("status", status),
        _element("summary", summary),
        _element("result", payload.result.summary or "(no answer)"),
    ]
    if payload.result.artifacts:
        files = "".join(_element("file", a.ref) for a in payload.result.artifacts)
        lines.append(f"<artifacts>{files}</artifacts>")
    stats = payload.stats
    cost = f"{stats.cost_usd:.6f}" if stats.cost_usd is not None else None
    usage = [
        _element(tag, value)
        for tag, value in (
            ("total-tokens", stats.tokens),
            ("cost-usd", cost),
            ("tool-uses", stats.tool_uses),
            ("duration-ms", stats.duration_ms),
        )
        if value is not None
    ]
    lines.append("<usage>" + "".join(usage) + "</usage>")
    lines.append("</task-notification>")
    return "\n".join(lines)


def unreadable_notification(problem: str) -> str:
    """What a coordinator sees for a report that cannot be read (an old or damaged row)."""
    return "\n".join(
        [
            "<task-notification>",
            _element("status", "unreadable"),
            _element("summary", f"a worker finished, but its report cannot be read: {problem}"),
            "</task-notification>",
        ]
    )
