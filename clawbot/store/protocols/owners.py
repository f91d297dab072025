"""The repository of who runs which session's turns, when several processes share one
database (PostgreSQL): each session has one owner at a time, a live process; a message another
process takes in is stored there and the owner told (docs/postgres.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Protocol

from clawbot.store.records import Adoption, OwnerClaim, OwnerNotice


class SessionOwners(Protocol):
    """On SQLite, one process serves a home and owns every session: ``shared`` is False and
    every claim is this process's."""

    @property
    def shared(self) -> bool:
        """Whether other processes may serve the same database."""
        ...

    async def claim(self, session_key: str) -> OwnerClaim:
        """The session's owner, made this process when it has none or a dead one."""
        ...

    async def owned(self, session_keys: Collection[str]) -> set[str]:
        """Which of ``session_keys`` this process owns."""
        ...

    async def adopt(self, *, lease: float, startup: bool = False) -> Adoption:
        """Say this process lives for ``lease`` more seconds and take over the sessions of
        processes that stopped saying so (at ``startup`` also sessions with work and no
        owner, as a copied database has)."""
        ...

    async def keep_alive(self, *, lease: float, every: float, lapsed: Callable[[], None]) -> None:
        """Renew this process's claim every ``every`` seconds, for ``lease`` seconds, on a
        connection of its own (never queued behind the turns' writes), until cancelled;
        ``lapsed`` is called when the claim had expired (another process may have taken
        this one's sessions)."""
        ...

    async def tell(self, owner: str, notice: OwnerNotice) -> None:
        """Tell the process ``owner`` about one of its sessions."""
        ...

    async def listen(self, heard: Callable[[OwnerNotice], Awaitable[None]]) -> None:
        """Call ``heard`` with each notice for this process, until cancelled; after a lost
        connection (notices may have been missed) ``heard`` gets a ``work`` notice for the
        empty session key: look at every owned session."""
        ...

    async def leave(self) -> None:
        """This process stops serving: its sessions go to the others at once."""
        ...
