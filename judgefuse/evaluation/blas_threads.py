"""BLAS on one thread for the offline commands that fit and bootstrap over arrays (``eval``,
``compare``, ``tune``).

Why: their matrix products are narrow (items x a few dozen columns), so a second BLAS thread
saves little on an idle machine and costs much on a busy one (threads spinning for a core: ``eval``
at 10^5 items took 125 s instead of 42 on this 2-core machine at load 6). Even idle, OpenBLAS's
threads cost ``compare`` at 10^5 items 3.74 s of wall time against 2.22 s on one thread, and
``tune --method offset_stacked`` 1.45x the CPU (2-core machine, ``farm-bench``, medians of 3).
And the numbers do not depend on the machine's thread count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["one_blas_thread"]


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread inside the block. threadpoolctl comes with scikit-learn; without
    it nothing is changed."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
