"""A child session's key names its parent; its id is what follows the parent's key."""

from __future__ import annotations

import pytest

from clawbot.routing.sessions import child_id_of, child_key, parent_key_of


def test_a_child_key_is_the_internal_channel_the_parents_key_and_the_child_id() -> None:
    assert child_key("telegram:42", "r1") == "internal:telegram:42/r1"


def test_the_child_id_and_parent_are_read_back_from_a_childs_key() -> None:
    key = child_key("slack:C1:1700.1", "r1")

    assert child_id_of(key) == "r1"
    assert parent_key_of(key) == "slack:C1:1700.1"


def test_a_grandchilds_key_reads_back_its_own_id_and_its_parents_key() -> None:
    grandchild = child_key(child_key("telegram:42", "r1"), "w2")

    assert child_id_of(grandchild) == "w2"
    assert parent_key_of(grandchild) == "internal:telegram:42/r1"


@pytest.mark.parametrize("key", ["telegram:42", "internal:cron", "internal:/x", "internal:a/"])
def test_a_key_that_is_not_a_childs_has_no_child_id(key: str) -> None:
    assert child_id_of(key) is None
    assert parent_key_of(key) is None


@pytest.mark.parametrize("child_id", ["", "a/b"])
def test_a_child_id_that_would_make_the_key_ambiguous_is_refused(child_id: str) -> None:
    with pytest.raises(ValueError):
        child_key("telegram:42", child_id)
