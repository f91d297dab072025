"""Grants: what lets a guarded tool run without asking again.

"Approve once" lets a guarded tool run for the rest of the run on the same resource
(revoked when the run ends); "approve for this session" lets it run in that session until
``/new`` or ``/grants clear``. A standing grant (``CLAWBOT_GRANTS``) lets it run always.
An unsafe tool asks at every call, whatever was granted.
"""

from __future__ import annotations

from clawbot.clock import Clock
from clawbot.routing.sessions import Session
from clawbot.security.approval_records import ApprovalRequest, Grant, GrantScope
from clawbot.settings import Settings
from clawbot.store.interface import Store


class Grants:
    """The grants of the chats: looked up before a guarded call asks, added when one is
    approved, revoked with their run, listed and cleared by ``/grants``."""

    def __init__(self, *, settings: Settings, store: Store, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self._runs_with_grants: set[str] = set()

    async def granted(
        self, session: Session, root: Session, tool: str, resource: str | None, run_id: str
    ) -> str | None:
        if tool in self.settings.grants:
            return "standing grant"
        for grant in await self.store.approvals.grants(session.key, tool):
            if grant.scope == "session" and grant.root_epoch == root.epoch:
                return "granted for this session"
            if grant.scope == "run" and grant.run_id == run_id and grant.resource == resource:
                return "granted for this run"
        return None

    async def add(
        self,
        request: ApprovalRequest,
        session: Session,
        root: Session,
        resource: str | None,
        run_id: str,
    ) -> None:
        """Grant what the approved guarded ``request`` allows: its tool for the session, or
        for the run on ``resource``."""
        scope: GrantScope = "session" if request.scope == "session" else "run"
        await self.store.approvals.add_grant(
            Grant(
                session_key=session.key,
                root_key=root.key,
                root_epoch=root.epoch,
                tool=request.tool,
                resource=None if scope == "session" else resource,
                scope=scope,
                run_id=run_id if scope == "run" else None,
                approval_id=request.id,
                created_at=self.clock.now(),
            )
        )
        if scope == "run":
            self._runs_with_grants.add(run_id)

    async def run_ended(self, run_id: str) -> None:
        """Revoke the run's grants (the few runs that hold any pay for a write)."""
        if run_id in self._runs_with_grants:
            self._runs_with_grants.discard(run_id)
            await self.store.approvals.revoke_run(run_id)

    async def text(self, chat: Session) -> str:
        """What ``/grants`` shows: the grants given in this chat that still hold."""
        lines = []
        for grant in await self.store.approvals.grants_under(chat.key):
            if grant.scope == "session" and grant.root_epoch != chat.epoch:
                continue
            where = "" if grant.session_key == chat.key else f" (subagent {grant.session_key})"
            scope = "this session" if grant.scope == "session" else "this run"
            on = f" on {grant.resource}" if grant.resource else ""
            lines.append(f"- {grant.tool}{on}: {scope}{where}, request {grant.approval_id}")
        if not lines:
            return "No grants: guarded tools ask before they run."
        return "Grants in this chat (/grants clear removes them):\n" + "\n".join(lines)

    async def clear(self, chat: Session) -> str:
        removed = await self.store.approvals.clear_grants(chat.key)
        return (
            f"Cleared {removed} grant(s): guarded tools ask again."
            if removed
            else ("No grants to clear.")
        )
