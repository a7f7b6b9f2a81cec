"""Large array work in two halves, the second half on a helper thread.

numpy's element-wise kernels and reductions and scipy's sparse products release Python's lock, so
on a machine with two or more cores the calling thread computes one half of a large operation
while one helper thread computes the other (``both``). Every half is computed exactly as it is
inside the whole (a product's rows, an element-wise operation's cells, a reduction's whole
segments), so the results are the same bits as on one thread; only the time changes.

While a fit works in halves, BLAS (OpenBLAS, numpy's and scipy's) is held to one thread
(``one_blas_thread``): after each call its idle threads spin for milliseconds, taking the core the
helper needs (a fit's steps on two million cells took 46 ms with them spinning, 30 ms without,
43 ms on one thread), and a dot product's bits then do not depend on the machine's cores.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

A = TypeVar("A")
B = TypeVar("B")

#: Work over fewer cells than this stays on one thread: handing a half over and waking the waiting
#: thread again cost about 70 microseconds, so a sum or product over 100,000 cells (about 0.1 ms)
#: took longer in two halves, one over 360,000 cells a little less (benchmarks/README.md, "Two cores").
SPLIT_CELLS = 262_144


class _Local(threading.local):
    helper = False  # True in the helper thread (``_mark_helper``)


_local = _Local()
_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None
_lock = threading.Lock()
_blas: Any = None  # threadpoolctl's controller of the loaded BLAS libraries, made on first use


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _mark_helper() -> None:
    _local.helper = True


def helper() -> ThreadPoolExecutor | None:
    """The process's one helper thread, or None on a single core. A forked child, which inherits
    the pool but not its thread, starts its own."""
    global _pool, _pool_pid
    if _pool is not None and _pool_pid == os.getpid():  # every hand-over asks: no lock, no system call
        return _pool
    if cores() < 2:
        return None
    with _lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(1, thread_name_prefix="privsyn-fed-half", initializer=_mark_helper)
            _pool_pid = os.getpid()
        return _pool


def split(cells: int) -> bool:
    """Whether work over ``cells`` cells is worth two halves here."""
    return cells >= SPLIT_CELLS and helper() is not None


def both(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """``(first(), second())``: ``first`` on the helper thread while this thread runs ``second``
    (both here, one after the other, on one core or when called from the helper itself)."""
    pool = None if _local.helper else helper()
    if pool is None:
        return first(), second()
    pending = pool.submit(first)
    try:
        out = second()
    finally:
        done = pending.result()  # waited for even when ``second`` raised: no half left running
    return done, out


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Hold BLAS to one thread inside the block (module docstring); its setting is restored after."""
    global _blas
    from threadpoolctl import ThreadpoolController

    if _blas is None:
        _blas = ThreadpoolController()
    with _blas.limit(limits=1, user_api="blas"):
        yield
