"""The assume cache: decisions that the informer has not confirmed yet.

kube-scheduler's ``AssumePod`` / ``ForgetPod`` in a few lines. A pod is *assumed* on a node
the moment a session decides it, before its binding is even sent. Every following snapshot
sees it as bound there (its requests count against the node, its gang counts it as
placed), so a later cycle can neither re-decide it nor give its room to someone else. The
assumption ends when

* the informer shows the pod with ``spec.nodeName`` set (the API confirmed the bind),
* the pod is gone or was recreated under the same name (another UID), or
* its binding failed (:meth:`AssumeCache.forget`): then the room is free again and the
  pod is pending for the next session.

A binding that succeeded but whose watch event has not arrived yet keeps the pod assumed:
the room stays taken until the informer catches up (a relist after 410 included).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hyperplace.kube.objects import namespaced_key
from hyperplace.runtime.api import Obj, meta


@dataclass(frozen=True)
class Assumed:
    """One decided pod: where it goes, and which gang decided it."""

    key: str  # namespace/name
    uid: str
    node: str
    job: str  # the PodGroup key ("ns/pg"), for requeueing the whole gang
    bound: bool = False  # the binding call returned success


class AssumeCache:
    """Pods decided but not yet seen bound; see the module docstring."""

    def __init__(self) -> None:
        self._pods: dict[str, Assumed] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    def get(self, key: str) -> Assumed | None:
        """The assumption for ``key``, if any."""
        return self._pods.get(key)

    def items(self) -> list[Assumed]:
        """Every current assumption."""
        return list(self._pods.values())

    def assume(self, key: str, uid: str, node: str, job: str) -> Assumed:
        """Count ``key`` as placed on ``node`` from now on."""
        a = self._pods[key] = Assumed(key, uid, node, job)
        return a

    def mark_bound(self, key: str) -> None:
        """The binding call succeeded; keep assuming until the informer shows it."""
        a = self._pods.get(key)
        if a is not None:
            self._pods[key] = Assumed(a.key, a.uid, a.node, a.job, bound=True)

    def forget(self, key: str) -> Assumed | None:
        """Drop the assumption (its binding failed); returns what was assumed."""
        return self._pods.pop(key, None)

    def observe(self, pod: Mapping[str, Any] | None, key: str) -> None:
        """Informer news about ``key`` (None when deleted): drop a settled assumption."""
        a = self._pods.get(key)
        if a is None:
            return
        if pod is None or str(meta(pod).get("uid") or "") != a.uid:
            del self._pods[key]  # deleted, or recreated: the old decision is moot
        elif (pod.get("spec") or {}).get("nodeName"):
            del self._pods[key]  # the API has it bound: the informer's view is the truth now

    def overlay(self, pods: Iterable[Obj]) -> list[Obj]:
        """``pods`` with every assumed pod shown bound to its node (copies; inputs untouched).

        Assumptions whose pod is absent are dropped here too, so a missed delete event
        cannot keep room reserved forever.
        """
        out: list[Obj] = []
        seen: set[str] = set()
        for pod in pods:
            key = namespaced_key(pod)
            a = self._pods.get(key)
            if a is not None and not (pod.get("spec") or {}).get("nodeName"):
                if str(meta(pod).get("uid") or "") == a.uid:
                    seen.add(key)
                    pod = copy.copy(pod)
                    pod["spec"] = {**(pod.get("spec") or {}), "nodeName": a.node}
            elif a is not None:
                seen.add(key)
            out.append(pod)
        for key in set(self._pods) - seen:
            del self._pods[key]
        return out
