"""Rows no caller waits for: held for the next transaction, committed alone after a
while, given back when their transaction rolled back, from whichever thread it ran on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from clawbot.store import riding_rows
from clawbot.store.riding_rows import RidingRows


class Commits:
    """A database's transaction with no work of its own: takes what waits."""

    def __init__(self) -> None:
        self.rows: RidingRows[str] = RidingRows(self.commit_alone)
        self.written: list[str] = []
        self.fail_next = False

    async def commit_alone(self) -> None:
        taken = self.rows.take()
        if self.fail_next:
            self.fail_next = False
            self.rows.give_back(taken)
            raise RuntimeError("the database refused")
        self.written += taken


async def loop_passes(until: Callable[[], object], passes: int = 200) -> None:
    for _ in range(passes):
        if until():
            return
        await asyncio.sleep(0)


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(riding_rows, "SOON_WAIT", 0)


async def test_a_row_rides_on_the_next_transaction_without_one_of_its_own() -> None:
    commits = Commits()
    commits.rows.add("usage")

    ridden = commits.rows.take()
    await loop_passes(lambda: False, passes=20)

    assert ridden == ["usage"]
    assert commits.written == []  # the timer found nothing left to commit


async def test_a_row_no_transaction_takes_commits_on_its_own() -> None:
    commits = Commits()
    commits.rows.add("usage")

    await loop_passes(lambda: commits.written)

    assert commits.written == ["usage"]


async def test_rows_of_a_failed_commit_are_committed_by_the_next_round() -> None:
    commits = Commits()
    commits.fail_next = True
    commits.rows.add("usage")

    await loop_passes(lambda: commits.written)

    assert commits.written == ["usage"]


async def test_rows_given_back_on_another_thread_wait_first_in_line_and_commit() -> None:
    commits = Commits()
    commits.rows.add("first")
    taken = commits.rows.take()
    commits.rows.add("second")
    commits.rows.take()  # the timer's transaction came and went: nothing waits
    commits.written.clear()
    commits.rows.add("third")
    thread = threading.Thread(target=commits.rows.give_back, args=(taken,))
    thread.start()
    thread.join()

    await loop_passes(lambda: commits.written)

    assert commits.written == ["first", "third"]


async def test_a_closed_holder_arms_no_timer() -> None:
    commits = Commits()
    commits.rows.close()
    commits.rows.add("usage")

    await loop_passes(lambda: False, passes=20)

    assert commits.written == []
    assert commits.rows.take() == ["usage"]  # its database writes them as it closes
