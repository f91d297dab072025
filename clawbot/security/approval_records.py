"""The records of approvals and grants, shared by the store and ``clawbot.security.approvals``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from clawbot.policies import Risk

ApprovalStatus = Literal["pending", "approved", "denied", "expired"]
ApprovalScope = Literal["once", "session"]
GrantScope = Literal["run", "session"]


@dataclass(frozen=True)
class ApprovalRequest:
    """One tool call waiting for (or answered by) a person. ``resource`` is the path or
    host the call names, ``chain`` the agents from the root down (``main>researcher``),
    ``message_id`` the platform id of the message that asked (edited once answered)."""

    id: str
    call_key: str
    session_key: str
    root_key: str
    turn_id: str
    trace_id: str
    tool: str
    resource: str | None
    risk: Risk
    chain: str
    summary: str
    status: ApprovalStatus
    scope: ApprovalScope | None
    answered_by: str | None
    created_at: datetime
    expires_at: datetime
    answered_at: datetime | None
    message_id: str | None = None


@dataclass(frozen=True)
class OpenedRequest:
    """What storing a request found: the request as stored, and whether this call stored
    it (False: the same call had asked before, as a turn re-run after a restart does)."""

    request: ApprovalRequest
    new: bool


@dataclass(frozen=True)
class Grant:
    """Lets a guarded tool run without asking: in one ``run`` (for one resource) or for a
    ``session`` (until ``/new``: ``root_epoch`` is the root session's epoch when granted)."""

    session_key: str
    root_key: str
    root_epoch: int
    tool: str
    resource: str | None
    scope: GrantScope
    run_id: str | None
    approval_id: str
    created_at: datetime
    id: int | None = None
