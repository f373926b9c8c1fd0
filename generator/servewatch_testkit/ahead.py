"""Servers a test module will ask for, prepared a few at once in the background.

A backfilled Prometheus takes seconds to prepare, mostly waiting on promtool's queries and the disk
rather than computing, so a module that needs one per scenario gets them sooner by preparing the next
few while its tests query the current one:

    ahead = Ahead(make_server, ahead.asked(request), workers=3)
    yield ahead            # ahead(name): that scenario's server, waiting for it if need be
    ahead.close(lambda server: server.close())

Names are prepared in the order given (the order the tests first ask for them); a name not given is
prepared when first asked for. ``close`` drops what was not started yet (``-x`` stopped the module
early) and stops the rest all at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

__all__ = ["Ahead", "asked"]

T = TypeVar("T")


def asked(request: Any, param: str = "name") -> list[str]:
    """The ``param`` values of the selected tests of ``request``'s module that use its fixture, in
    the order they run."""
    return list(
        dict.fromkeys(
            item.callspec.params[param]
            for item in request.session.items
            if item.module is request.module
            and request.fixturename in item.fixturenames
            and param in getattr(getattr(item, "callspec", None), "params", {})
        )
    )


class Ahead(Generic[T]):
    def __init__(self, make: Callable[[str], T], names: Iterable[str], workers: int):
        self._make = make
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._ready: dict[str, Future] = {name: self._pool.submit(make, name) for name in names}

    def __call__(self, name: str) -> T:
        if name not in self._ready:
            self._ready[name] = self._pool.submit(self._make, name)
        return self._ready[name].result()

    def close(self, stop: Callable[[T], None]) -> None:
        for future in self._ready.values():
            future.cancel()  # only those not started yet
        for future in self._ready.values():  # stopping a server takes a while too
            if not future.cancelled():
                self._pool.submit(_stop, future, stop)
        self._pool.shutdown()


def _stop(future: Future, stop: Callable[[Any], None]) -> None:
    if future.exception() is None:  # one that failed to start has stopped itself
        stop(future.result())
