"""kube-scheduler's VolumeBinding PreBind, for gangs: before any pod of a gang is bound, the
claims the session chose for it are written and waited for.

* **Writes** (``bindAPIUpdate``): a claim matched to an available PersistentVolume gets the
  volume's ``spec.claimRef`` (and the ``pv.kubernetes.io/bound-by-controller`` annotation, as
  ``GetBindVolumeToClaim`` sets it); a claim to be provisioned gets the
  ``volume.kubernetes.io/selected-node`` annotation. The PersistentVolume controller of
  kube-controller-manager (and an external provisioner) does the rest.
* **Assumed at once** (kube-scheduler's assume cache): the written objects are what the next
  sessions see from the moment the gang is decided, until the informer shows a newer version,
  so a volume is never handed out twice while the writes are under way.
* **Waited for** (``checkBindings``): every claim of the gang fully bound (a volume name and the
  controller's bind-completed annotation), within ``timeout``. Only then are the gang's pods
  bound: no pod of a gang is bound before every claim of the gang is.
* **Given back** on a failure (a write refused, a claim deleted, a claimRef or selected node
  reset, a pod gone, the timeout): the claimRefs and annotations written here come off again
  where the claim has not been bound meanwhile, and no pod is bound; the next session decides
  the gang afresh.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hyperplace.runtime.api import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    ApiClient,
    ApiError,
    Obj,
    clone,
    meta,
)
from hyperplace.runtime.informer import Informer
from scheduler_plugin.filters.volume_binding import Decision
from scheduler_plugin.filters.volumes import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    pod_claim_keys,
)

log = logging.getLogger(__name__)

# kube-scheduler's default --bind-timeout-seconds for volume binding (VolumeBindingArgs).
DEFAULT_BIND_TIMEOUT = 600.0


class PreBindError(Exception):
    """Why a gang's claims could not be bound (kube-scheduler's words where it has them)."""


@dataclass
class ClaimWrite:
    """One claim's write: the object as PreBind wants it, and what became of it."""

    claim: str  # namespace/name
    volume: str | None  # the PersistentVolume whose claimRef is set
    node: str | None  # the node the claim is annotated with
    want: Obj  # the PersistentVolume (volume) or the claim (node) as written
    base_rv: str  # the resourceVersion the change was made on
    changed: bool  # False: already so (nothing to write, nothing to give back)
    added_bound_by: bool = False  # the bound-by-controller annotation is ours
    written: bool = False  # the write was sent (it may have landed even if it failed)


class VolumeAssumptions:
    """Objects PreBind wrote (or is writing), shown instead of the informer's version they were
    made on until the informer has another."""

    def __init__(self) -> None:
        self._objs: dict[tuple[str, str], tuple[Obj, str]] = {}

    def put(self, kind: str, key: str, obj: Obj, base_rv: str) -> None:
        """Show ``obj`` for ``key`` while the informer's version is ``base_rv``."""
        self._objs[(kind, key)] = (obj, base_rv)

    def drop(self, kind: str, key: str) -> None:
        """Show the informer's version again."""
        self._objs.pop((kind, key), None)

    def overlay(self, kind: str, key: str, informer_obj: Obj | None) -> Obj | None:
        """The object a session should see for ``key``."""
        got = self._objs.get((kind, key))
        if got is None:
            return informer_obj
        if informer_obj is not None and str(meta(informer_obj).get("resourceVersion") or "") == got[1]:
            return got[0]
        del self._objs[(kind, key)]  # the informer moved on (our write, or another's)
        return informer_obj

    def __len__(self) -> int:
        return len(self._objs)


def claim_reference(pvc: Obj) -> dict[str, str]:
    """``reference.GetReference`` of a claim, as a PersistentVolume's claimRef holds it."""
    m = meta(pvc)
    return {
        "kind": "PersistentVolumeClaim",
        "namespace": str(m.get("namespace") or "default"),
        "name": str(m.get("name") or ""),
        "uid": str(m.get("uid") or ""),
        "apiVersion": "v1",
        "resourceVersion": str(m.get("resourceVersion") or ""),
    }


def _ref_names(pv: Obj, pvc_key: str, uid: str | None = None) -> bool:
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    if f"{ref.get('namespace') or 'default'}/{ref.get('name') or ''}" != pvc_key:
        return False
    return uid is None or not ref.get("uid") or ref.get("uid") == uid


def _fully_bound(pvc: Obj) -> bool:
    return bool((pvc.get("spec") or {}).get("volumeName")) and ANN_BIND_COMPLETED in (
        meta(pvc).get("annotations") or {}
    )


class PreBind:
    """Plans, assumes, writes, waits for and gives back a gang's claims; see the module
    docstring."""

    def __init__(
        self,
        api: ApiClient,
        pvs: Informer,
        pvcs: Informer,
        *,
        sync: Callable[[str, str], None],
        timeout: float = DEFAULT_BIND_TIMEOUT,
        poll: float = 1.0,
    ) -> None:
        """``sync(kind, key)``: show the state an object as sessions should see it
        (``kind``: ``pv`` or ``pvc``); ``poll``: at most this long between two checks of the
        claims (the informers' events wake the check sooner)."""
        self.api, self.pvs, self.pvcs = api, pvs, pvcs
        self.assumed = VolumeAssumptions()
        self._sync = sync
        self.timeout = timeout
        self.poll = poll
        self.changed = asyncio.Event()  # set by the claim and volume informers' handlers

    def pv(self, name: str) -> Obj | None:
        """A PersistentVolume as sessions see it."""
        return self.assumed.overlay("pv", name, self.pvs.get(name))

    def pvc(self, key: str) -> Obj | None:
        """A claim as sessions see it."""
        return self.assumed.overlay("pvc", key, self.pvcs.get(key))

    # ------------------------------------------------------------------ plan
    def plan(self, pods: Iterable[Obj], decisions: Mapping[str, Decision]) -> list[ClaimWrite]:
        """The writes the claims of ``pods`` need, assumed at once (call it on the loop, with
        no await between the session's end and this). Raises PreBindError when a claim or its
        volume is gone since the session."""
        keys: dict[str, None] = {}
        for p in pods:
            for key, _eph in pod_claim_keys(p):
                if key in decisions:
                    keys[key] = None
        writes: list[ClaimWrite] = []
        for key in keys:
            d = decisions[key]
            pvc = self.pvc(key)
            if pvc is None:
                raise PreBindError(f'persistentvolumeclaim "{key.split("/", 1)[1]}" not found')
            if d.volume is not None:
                writes.append(self._bind_volume(d.volume, key, pvc))
            else:
                writes.append(self._select_node(key, pvc, str(d.node)))
        for w in writes:
            if w.changed:
                kind, k = ("pv", str(w.volume)) if w.volume is not None else ("pvc", w.claim)
                self.assumed.put(kind, k, w.want, w.base_rv)
                self._sync(kind, k)
        return writes

    def _bind_volume(self, name: str, key: str, pvc: Obj) -> ClaimWrite:
        pv = self.pv(name)
        if pv is None:
            raise PreBindError(f'persistentvolume "{name}" not found')
        uid = str(meta(pvc).get("uid") or "")
        if (pv.get("spec") or {}).get("claimRef") and not _ref_names(pv, key, uid):
            # Taken by another claim since the session looked: never overwrite a claimRef.
            raise PreBindError(f'persistentvolume "{name}" is bound to another claim')
        want = clone(pv)
        ann = want.setdefault("metadata", {}).setdefault("annotations", {}) or {}
        want["metadata"]["annotations"] = ann
        changed = added = False
        ref = (want.get("spec") or {}).get("claimRef") or {}
        already = _ref_names(pv, key, uid)
        if not already or ref.get("uid") != uid:
            want.setdefault("spec", {})["claimRef"] = claim_reference(pvc)
            changed = True
        if not already and ANN_BOUND_BY_CONTROLLER not in ann:
            ann[ANN_BOUND_BY_CONTROLLER] = "yes"
            changed = added = True
        rv = str(meta(pv).get("resourceVersion") or "")
        return ClaimWrite(key, name, None, want, rv, changed, added_bound_by=added)

    def _select_node(self, key: str, pvc: Obj, node: str) -> ClaimWrite:
        want = clone(pvc)
        ann = want.setdefault("metadata", {}).setdefault("annotations", {}) or {}
        want["metadata"]["annotations"] = ann
        changed = ann.get(ANN_SELECTED_NODE) != node
        ann[ANN_SELECTED_NODE] = node
        return ClaimWrite(key, None, node, want, str(meta(pvc).get("resourceVersion") or ""), changed)

    # ------------------------------------------------------------------ write and wait
    async def run(self, writes: Sequence[ClaimWrite], pods_exist: Callable[[], bool]) -> None:
        """Write, then wait until every claim is bound. Raises PreBindError (the writes stay:
        :meth:`give_back` takes them off)."""
        for w in writes:
            if not w.changed:
                continue
            res, ns = (
                (PERSISTENT_VOLUMES, None)
                if w.volume is not None
                else (PERSISTENT_VOLUME_CLAIMS, w.claim.split("/", 1)[0])
            )
            w.written = True
            try:
                await self.api.replace(res, w.want, ns)
            except ApiError as exc:
                raise PreBindError(f"binding volumes: {exc}") from None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            self.changed.clear()
            if not pods_exist():
                raise PreBindError("binding volumes: pod does not exist any more")
            if self._bound(writes):
                return
            left = deadline - loop.time()
            if left <= 0:
                raise PreBindError("binding volumes: context deadline exceeded")
            try:
                async with asyncio.timeout(min(self.poll, left)):
                    await self.changed.wait()
            except TimeoutError:
                pass

    def _bound(self, writes: Sequence[ClaimWrite]) -> bool:
        """``checkBindings``: True when every claim is fully bound; raises on what will not
        come right by waiting."""
        done = True
        for w in writes:
            name = w.claim.split("/", 1)[1]
            pvc = self.pvcs.get(w.claim)
            if w.volume is not None:
                if pvc is None:
                    raise PreBindError(
                        f'binding volumes: failed to check binding: persistentvolumeclaim "{name}" not found'
                    )
                pv = self.pvs.get(w.volume)
                if pv is None:
                    raise PreBindError(
                        f'binding volumes: failed to check binding: persistentvolume "{w.volume}" not found'
                    )
                if w.changed and str(meta(pv).get("resourceVersion") or "") == w.base_rv:
                    done = False  # our write is not in the informer yet
                    continue
                ref = (pv.get("spec") or {}).get("claimRef") or {}
                if not ref or not ref.get("uid"):
                    raise PreBindError(f'binding volumes: ClaimRef got reset for pv "{w.volume}"')
                if not _fully_bound(pvc):
                    done = False
            else:
                if pvc is None:
                    raise PreBindError(
                        f'binding volumes: failed to check provisioning pvc: persistentvolumeclaim "{name}" not found'
                    )
                if w.changed and str(meta(pvc).get("resourceVersion") or "") == w.base_rv:
                    done = False
                    continue
                ann = meta(pvc).get("annotations") or {}
                if ANN_SELECTED_NODE not in ann:
                    raise PreBindError(f'binding volumes: selectedNode annotation reset for PVC "{name}"')
                if ann[ANN_SELECTED_NODE] != w.node:
                    raise PreBindError(f'binding volumes: provisioning failed for PVC "{name}"')
                if not _fully_bound(pvc):
                    done = False
        return done

    # ------------------------------------------------------------------ give back
    async def give_back(self, writes: Sequence[ClaimWrite]) -> None:
        """Take this gang's writes off again where the claim was not bound meanwhile (best
        effort: a write that fails is logged; the PersistentVolume controller then owns it)."""
        for w in writes:
            if not w.changed:
                continue
            kind, key = ("pv", str(w.volume)) if w.volume is not None else ("pvc", w.claim)
            self.assumed.drop(kind, key)
            self._sync(kind, key)
            if not w.written:
                continue
            try:
                if w.volume is not None:
                    await self._unbind_volume(w)
                else:
                    await self._unselect_node(w)
            except ApiError as exc:
                log.warning("giving back claim %s (%s): %s", w.claim, w.volume or w.node, exc)

    async def _unbind_volume(self, w: ClaimWrite) -> None:
        assert w.volume is not None
        try:
            pv = await self.api.get(PERSISTENT_VOLUMES, w.volume)
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        uid = str((w.want.get("spec") or {}).get("claimRef", {}).get("uid") or "")
        if not _ref_names(pv, w.claim, uid):
            return  # not ours any more
        try:
            pvc: Obj | None = await self.api.get(
                PERSISTENT_VOLUME_CLAIMS, w.claim.split("/", 1)[1], w.claim.split("/", 1)[0]
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
            pvc = None
        if pvc is not None and (pvc.get("spec") or {}).get("volumeName") == w.volume:
            return  # bound by the controller meanwhile: the claim keeps its volume
        out = clone(pv)
        out["spec"].pop("claimRef", None)
        ann = out.get("metadata", {}).get("annotations") or {}
        if w.added_bound_by:
            ann.pop(ANN_BOUND_BY_CONTROLLER, None)
        await self.api.replace(PERSISTENT_VOLUMES, out)
        log.info("gave back persistentvolume %s (claim %s)", w.volume, w.claim)

    async def _unselect_node(self, w: ClaimWrite) -> None:
        ns, name = w.claim.split("/", 1)
        try:
            pvc = await self.api.get(PERSISTENT_VOLUME_CLAIMS, name, ns)
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        ann = meta(pvc).get("annotations") or {}
        if ann.get(ANN_SELECTED_NODE) != w.node or (pvc.get("spec") or {}).get("volumeName"):
            return
        out = clone(pvc)
        out["metadata"]["annotations"].pop(ANN_SELECTED_NODE, None)
        await self.api.replace(PERSISTENT_VOLUME_CLAIMS, out, ns)
        log.info("gave back the node of claim %s", w.claim)
