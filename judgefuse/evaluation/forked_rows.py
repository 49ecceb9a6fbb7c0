"""Work given to a forked child process while the parent does its own: some rows of ``eval``
(below), the second half of a large votes file
(:func:`~judgefuse.evaluation.loaders.votes_columnar.read_vote_table`).

Why: at 10^6 items the two stacking rows (``stacked``, ``offset_stacked``) are 23 s of ``eval``'s
59 s of CPU and every other row together about 11 s. On a machine with a second core a child
fits the stacking rows while the parent does the rest (every other row, then their intervals and
reports: :func:`~judgefuse.evaluation.table_eval.evaluate_table`), and the wall time falls by the
shorter of the two. Nothing reported changes: a row is a pure function of the arrays and the
seed (the same folds, the same fits), computed by the same code in a copy of the same process.

How: :func:`os.fork` (through :mod:`multiprocessing`'s ``fork`` context) shares the vote arrays
copy-on-write, so nothing is pickled on the way in; each row's result (a few arrays) comes back
through a pipe, read as it comes by a thread of the parent's, so the child goes on to its next
row while the parent is busy with its own. A row the child could not give (it raised, or the
child died) is computed again in the parent, which then raises or answers exactly as it would
have alone: the child never decides an error. Only where ``fork`` is the platform's own (Linux),
the machine has a second core for this process and the work is large enough to gain
(:data:`FORK_MIN_ITEMS`).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

__all__ = ["FORK_MIN_ITEMS", "ForkedRows", "fork_helps"]

T = TypeVar("T")

FORK_MIN_ITEMS = 50_000
"""Labelled items from which ``eval`` fits its stacking rows in a child by default. Measured on
this 2-core machine, idle, interleaved with one process (the parent doing its own rows, their
intervals and reports while the child fits): 10^6 items 35-41 s against 60-71 s, 10^5 5.1-5.8 s
against 6.3-10.8 s, 5x10^4 0.81x one process's wall time, 10^4 0.88x; beside two busy loops 10^5
still 0.84x, but 3x10^4 0.79-1.23x (median 0.96x). So below 50,000 the second process is left
out: a second or less to gain, and a busy machine takes it back."""


def cores_available() -> int:
    """Cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def fork_helps(large: bool, jobs: int | None) -> bool:
    """Whether to give work to a child: ``jobs`` 2 or more asks for it (where ``fork`` exists),
    1 refuses it, None (the default) decides by the machine and whether the work is ``large``."""
    if not sys.platform.startswith("linux") or jobs == 1:
        return False
    if jobs is not None:
        return True
    return large and cores_available() >= 2


class ForkedRows(Generic[T]):
    """``compute(name)`` for each of ``names``, run in a forked child as soon as this object is
    made; :meth:`get` hands a row's result to the parent (computing it in the parent where the
    child could not). Close it (or use it as a context manager) to end the child.

    The results come over a one-way pipe whose only writer is the child, read as they come by a
    thread here: the child never waits for the parent to reach a row, and a child that dies
    mid-message ends the pipe (EOF) instead of leaving a half message to wait for."""

    def __init__(self, names: Sequence[str], compute: Callable[[str], T]) -> None:
        self._compute = compute
        self._ready: dict[str, T] = {}
        self._given_up: set[str] = set()
        self._ended = False
        self._changed = threading.Condition()
        context = multiprocessing.get_context("fork")
        reader, writer = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_child, args=(writer, list(names), compute), name="judgefuse-eval-rows", daemon=True
        )
        with warnings.catch_warnings():
            # Python 3.12+ warns at a fork in a process with threads (a progress bar's, a test
            # runner's): a lock another thread held at the fork stays held in the child. The
            # child here takes none of theirs: no terminal, no logging (:func:`_child`).
            warnings.filterwarnings(
                "ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning
            )
            self._process.start()
        writer.close()  # the child's copy is the pipe's only writer now
        self._reader = threading.Thread(target=self._read, args=(reader,), name="judgefuse-eval-rows", daemon=True)
        self._reader.start()

    def _read(self, reader: Connection) -> None:
        try:
            while True:
                name, ok, value = reader.recv()
                with self._changed:
                    if ok:
                        self._ready[name] = value
                    else:
                        self._given_up.add(name)
                    self._changed.notify_all()
        except (EOFError, OSError):  # the child finished, died, or was ended
            pass
        finally:
            reader.close()
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def get(self, name: str) -> T:
        """The row's result: the child's, or (where the child raised or died) the parent's own."""
        found = self.from_child(name)
        return self._compute(name) if found is None else found[0]

    def from_child(self, name: str) -> tuple[T] | None:
        """The child's result for the row (in a 1-tuple), or None where it raised or died."""
        with self._changed:
            self._changed.wait_for(lambda: name in self._ready or name in self._given_up or self._ended)
            return (self._ready.pop(name),) if name in self._ready else None

    def close(self) -> None:
        """End the child (it may still be fitting rows nobody asked for)."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._reader.join()

    def __enter__(self) -> ForkedRows[T]:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _child(results: Connection, names: list[str], compute: Callable[[str], Any]) -> None:
    """The child's work: each row in turn sent as (name, True, value), or (name, False, None)
    where it raised (the parent computes that row itself). The child writes nothing to the
    terminal and logs nothing (a value that needs a log line carries it to the parent): the
    parent's progress bar owns the terminal, and a lock its refresh thread held at the fork would
    never be released here."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the child's whole life)
    logging.disable(logging.CRITICAL)  # (the handlers hold the terminal's own streams)
    for name in names:
        try:
            value = compute(name)
        except Exception:  # noqa: BLE001 (the parent recomputes the row and raises it there; a Ctrl-C ends the child)
            results.send((name, False, None))
            continue
        results.send((name, True, value))
    results.close()
