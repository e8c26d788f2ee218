"""Deliberately broken schedulers: the campaign must catch each of them.

Each mutation is a context manager that patches one safety mechanism out of the real code
for the duration of a run (for the campaign only; nothing here is imported by the product):

``inflight-binds-not-counted``
    Decided pods are no longer shown bound in the next snapshot while their binds are in
    flight: the room a bind is about to take looks free, so a later cycle can give it away.
    Both places that overlay the assume cache are patched: ``Scheduler._sync_pod`` (the
    incremental :class:`~scheduler_plugin.cache.cluster_state.ClusterState` every session reads)
    and ``AssumeCache.overlay`` (the from-scratch rebuild of ``--full-rebuild`` and
    ``--verify-state``). Patching the overlay alone breaks only the rebuild, which then
    differs from the incremental state: a mutant "caught" by ``--verify-state`` stopping
    the scheduler, not by anything a user would see.
``gang-released-without-unbinding``
    When a gang's bind fails, the gang is released (its unsent binds dropped) but its
    assumptions are never undone: the failed and unsent pods stay "placed" in the
    scheduler's view and the gang is never finished.
``allocated-hypernode-not-recovered``
    A session no longer recovers a gang's allocated HyperNode from its pods already bound
    (after a restart or a failed bind), so the rest of the gang may go to another rack.
``node-failure-ignored``
    The job controller no longer sees a pod lost with its node (deleted, NotReady past the
    grace, untolerated NoExecute taint): the pods of a dead node stay "running" and their gang
    never runs whole again (a broken controller, not a scheduler: the campaign runs both).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

from controller.job import node_failure
from hyperplace.runtime.api import Obj
from scheduler_plugin.framework.session import Session
from scheduler_plugin.runtime.assume import AssumeCache, Assumed
from scheduler_plugin.runtime.scheduler import Scheduler, releasing


@contextlib.contextmanager
def inflight_binds_not_counted() -> Iterator[None]:
    original_overlay, original_sync = AssumeCache.overlay, Scheduler._sync_pod

    def overlay(self: AssumeCache, pods: Iterable[Obj]) -> list[Obj]:
        return list(pods)  # the assumptions stay, but no snapshot counts them

    def sync_pod(self: Scheduler, key: str) -> None:
        # The state shows the pod as the informer has it: pending until its bind's echo.
        pod = self.pods.get(key)
        if pod is not None and releasing(pod):
            pod = None  # terminating without a node: gone, as in the real _sync_pod
        if pod is None:
            self.state.remove_pod(key)
        else:
            self.state.set_pod(pod)

    AssumeCache.overlay = overlay  # type: ignore[method-assign]
    Scheduler._sync_pod = sync_pod  # type: ignore[method-assign]
    try:
        yield
    finally:
        AssumeCache.overlay = original_overlay  # type: ignore[method-assign]
        Scheduler._sync_pod = original_sync  # type: ignore[method-assign]


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


@contextlib.contextmanager
def node_failure_ignored() -> Iterator[None]:
    original = node_failure.node_failure

    def never(*_args: object, **_kwargs: object) -> node_failure.Verdict:
        return node_failure.Verdict()

    node_failure.node_failure = never
    try:
        yield
    finally:
        node_failure.node_failure = original


MUTATIONS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "inflight-binds-not-counted": inflight_binds_not_counted,
    "gang-released-without-unbinding": gang_released_without_unbinding,
    "allocated-hypernode-not-recovered": allocated_hypernode_not_recovered,
    "node-failure-ignored": node_failure_ignored,
}
