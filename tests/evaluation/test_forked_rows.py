"""Rows computed in a forked child (judgefuse.evaluation.forked_rows, issue 46): the child's values
reach the parent in any order; a row the child could not give (it raised, or the child died) is
computed in the parent, which raises what it raises; closing ends a child still at work."""

from __future__ import annotations

import os
import time

import pytest

from judgefuse.evaluation import forked_rows
from judgefuse.evaluation.forked_rows import ForkedRows, fork_helps

pytestmark = pytest.mark.skipif(not fork_helps(False, 2), reason="fork is Linux's")

PARENT = os.getpid()


def where(name: str) -> tuple[str, int]:
    return name, os.getpid()


def test_rows_come_from_the_child_in_any_order() -> None:
    with ForkedRows(["a", "b", "c"], where) as rows:
        got = [rows.get("c"), rows.get("a"), rows.get("b")]
    assert [name for name, _ in got] == ["c", "a", "b"]
    pids = {pid for _, pid in got}
    assert len(pids) == 1 and PARENT not in pids


def test_a_row_the_child_could_not_give_is_computed_here() -> None:
    def only_here(name: str) -> tuple[str, int]:
        if os.getpid() != PARENT:
            raise ValueError("a fault of the child's")
        return where(name)

    with ForkedRows(["a", "b"], only_here) as rows:
        assert rows.get("a") == ("a", PARENT)
        assert rows.get("b") == ("b", PARENT)


def test_a_row_that_raises_here_too_raises_its_own_error() -> None:
    def refused(name: str) -> None:
        raise KeyError(f"no row {name}")

    with ForkedRows(["a"], refused) as rows, pytest.raises(KeyError, match="no row a"):
        rows.get("a")


def test_a_child_that_dies_leaves_its_rows_to_the_parent() -> None:
    def dies_at_b(name: str) -> tuple[str, int]:
        if os.getpid() != PARENT and name == "b":
            os._exit(3)
        return where(name)

    with ForkedRows(["a", "b", "c"], dies_at_b) as rows:
        first = rows.get("a")
        assert rows.get("b") == ("b", PARENT)
        assert rows.get("c") == ("c", PARENT)
    assert first[1] != PARENT  # sent (into the pipe) before the child died


def test_an_interrupt_ends_the_child() -> None:
    """A Ctrl-C reaches the child too (one process group): it stops there, not at the next row."""

    def interrupted_at_a(name: str) -> tuple[str, int]:
        if os.getpid() != PARENT and name == "a":
            raise KeyboardInterrupt
        return where(name)

    with ForkedRows(["a", "b"], interrupted_at_a) as rows:
        assert rows.get("a") == ("a", PARENT)
        assert rows.get("b") == ("b", PARENT)


def test_closing_ends_a_child_still_at_work() -> None:
    def slow(name: str) -> str:
        if os.getpid() != PARENT:
            time.sleep(600)
        return name

    rows = ForkedRows(["a"], slow)
    process = rows._process
    rows.close()
    assert not process.is_alive() and process.exitcode is not None


def test_when_a_child_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not fork_helps(True, 1)  # asked for one process
    assert fork_helps(False, 2)  # asked for two, whatever the size
    monkeypatch.setattr(forked_rows, "cores_available", lambda: 2)
    assert fork_helps(True, None) and not fork_helps(False, None)
    monkeypatch.setattr(forked_rows, "cores_available", lambda: 1)
    assert not fork_helps(True, None)
