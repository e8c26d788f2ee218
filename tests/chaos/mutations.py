"""Deliberately broken schedulers: the campaign must catch each of them.

Each mutation is a context manager that patches one safety mechanism out of the real code
for the duration of a run (test-only; nothing here is imported by the product):

``inflight-binds-not-counted``
    The assume cache no longer shows decided pods as bound in the next snapshot: the room a
    bind in flight is about to take looks free, so a later cycle can give it away.
``gang-released-without-unbinding``
    When a gang's bind fails, the gang is released (its unsent binds dropped) but its
    assumptions are never undone: the failed and unsent pods stay "placed" in the
    scheduler's view and the gang is never finished.
``allocated-hypernode-not-recovered``
    A session no longer recovers a gang's allocated HyperNode from its pods already bound
    (after a restart or a failed bind), so the rest of the gang may go to another rack.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

from hyperplace.runtime.api import Obj
from scheduler_plugin.framework.session import Session
from scheduler_plugin.runtime.assume import AssumeCache, Assumed


@contextlib.contextmanager
def inflight_binds_not_counted() -> Iterator[None]:
    original = AssumeCache.overlay

    def overlay(self: AssumeCache, pods: Iterable[Obj]) -> list[Obj]:
        return list(pods)  # the assumptions stay, but no snapshot counts them

    AssumeCache.overlay = overlay  # type: ignore[method-assign]
    try:
        yield
    finally:
        AssumeCache.overlay = original  # type: ignore[method-assign]


@contextlib.contextmanager
def gang_released_without_unbinding() -> Iterator[None]:
    original = AssumeCache.forget

    def forget(self: AssumeCache, key: str) -> Assumed | None:
        return self.get(key)  # "released", but still counted as placed

    AssumeCache.forget = forget  # type: ignore[method-assign]
    try:
        yield
    finally:
        AssumeCache.forget = original  # type: ignore[method-assign]


@contextlib.contextmanager
def allocated_hypernode_not_recovered() -> Iterator[None]:
    original = Session._recover_allocated

    def recover(self: Session) -> None:
        return None

    Session._recover_allocated = recover  # type: ignore[method-assign]
    try:
        yield
    finally:
        Session._recover_allocated = original  # type: ignore[method-assign]


MUTATIONS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "inflight-binds-not-counted": inflight_binds_not_counted,
    "gang-released-without-unbinding": gang_released_without_unbinding,
    "allocated-hypernode-not-recovered": allocated_hypernode_not_recovered,
}
