"""One total deadline for a sequence of store calls, whatever the store does meanwhile.

A client's socket timeout bounds each read, not a request: a server that sends one
byte every 0.3 s never trips a 0.5 s read timeout and can hold a download for
minutes.  :func:`call_within` runs the calls on a helper thread and waits for
them until the deadline; past it, the store is told to :meth:`~Store.abort`
(which closes its sockets, so the helper thread ends too) and
:class:`~tilecore.remote.store.StoreError` ``("timeout", ...)`` is raised.  It
works for every store, built-in or third party, without knowing its client.

The wait ends :func:`reserve` seconds before the deadline: what follows it (waking the
waiting thread on a loaded machine, aborting the store, the warning) then fits in the
budget too, so a trickling or silent store costs the caller about the deadline, not the
deadline plus that tail (docs/benchmarks/cache.md has the figure measured under load).
All arithmetic is on ``time.monotonic()``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from tilecore.remote.store import StoreError

T = TypeVar("T")

#: Share of a deadline kept back for what follows the wait (see the module's docstring) ...
RESERVE_SHARE = 0.05
#: ... and at most this many seconds.
RESERVE_MAX_S = 0.05


def reserve(total_s: float) -> float:
    """Seconds before the end of a ``total_s`` budget at which :func:`call_within` stops waiting."""
    return min(total_s * RESERVE_SHARE, RESERVE_MAX_S)


def call_within(
    deadline: float,
    total_s: float,
    abort: Callable[[], None],
    work: Callable[[], T],
    what: str = "lookup deadline (setting deadline)",
) -> T:
    """``work()`` if it finishes before the monotonic time ``deadline`` (less :func:`reserve`);
    else call ``abort`` (e.g. a store's :meth:`~Store.abort`) and raise ``StoreError("timeout")``
    naming ``total_s``, the budget the deadline came from."""
    left = deadline - reserve(total_s) - time.monotonic()
    if left <= 0:
        raise StoreError("timeout", f"no time left of the {total_s:g} s {what}")
    done = threading.Event()
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as err:  # handed to the waiting thread
            errors.append(err)
        finally:
            done.set()

    threading.Thread(target=run, name="tilecore-remote-lookup", daemon=True).start()
    if not done.wait(left):
        with contextlib.suppress(Exception):  # best effort: the store is dropped anyway
            abort()
        raise StoreError("timeout", f"no complete answer within the {total_s:g} s {what}")
    if errors:
        raise errors[0]
    return results[0]
