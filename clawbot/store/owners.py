"""Session owners on SQLite: one process serves a home (its serving lock), so it owns every
session and has nobody to tell anything."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection

from clawbot.store.records import Adoption, OwnerClaim, OwnerNotice


class SingleOwner:
    """Every session is ``owner``'s."""

    def __init__(self, owner: str) -> None:
        self._owner = owner

    @property
    def shared(self) -> bool:
        return False

    async def claim(self, session_key: str) -> OwnerClaim:
        return OwnerClaim(owner=self._owner, mine=True)

    async def owned(self, session_keys: Collection[str]) -> set[str]:
        return set(session_keys)

    async def adopt(self, *, lease: float, startup: bool = False) -> Adoption:
        return Adoption(taken=frozenset(), lapsed=False)

    async def keep_alive(self, *, lease: float, every: float, lapsed: Callable[[], None]) -> None:
        await asyncio.Event().wait()  # nobody else could take a session over

    async def tell(self, owner: str, notice: OwnerNotice) -> None:
        return None

    async def listen(self, heard: Callable[[OwnerNotice], Awaitable[None]]) -> None:
        await asyncio.Event().wait()  # nobody else speaks: wait to be cancelled

    async def leave(self) -> None:
        return None
