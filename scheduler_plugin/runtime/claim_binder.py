"""kube-scheduler's DynamicResources PreBind, for gangs: before any pod of a gang is bound, the
ResourceClaims of its pods are written.

* **Writes** (``bindClaim``): a claim the session allocated gets the
  ``resource.kubernetes.io/delete-protection`` finalizer (a normal update), then
  ``status.allocation`` and its pods in ``status.reservedFor`` (an update of ``/status`` on the
  version the finalizer write returned); a claim already allocated gets its pods added to
  ``reservedFor``. A conflict re-reads the claim and tries again, as ``RetryOnConflict`` does;
  a claim deleted, or allocated elsewhere meanwhile, fails the gang.
* **Assumed at once** (kube-scheduler's assume cache and in-flight allocations): the claims as
  they will be written are what the next sessions see from the moment the gang is decided, so
  a device is never handed out twice while the writes are under way.
* **Given back** (Unreserve) when the gang fails before its pods are bound, and for each pod
  of a gang whose bind was not sent or failed: the pods come off ``reservedFor``, and a claim
  this scheduler allocated that no pod holds any more loses its allocation and the finalizer
  (kube-controller-manager's resourceclaim controller would deallocate it too; doing it here
  leaves no claim allocated for a pod that never ran, whether or not that controller runs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hyperplace.runtime.api import RESOURCE_CLAIMS, ApiClient, ApiError, Obj, clone, meta
from hyperplace.runtime.informer import Informer
from scheduler_plugin.filters.dra import compile_pod_claims
from scheduler_plugin.filters.dra_allocator import ClaimAllocation, allocation_to_wire

from .volume_binder import PreBindError, VolumeAssumptions

log = logging.getLogger(__name__)

FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256  # the API's ResourceClaimReservedForMaxSize
CONFLICT_RETRIES = 5  # client-go's retry.DefaultRetry steps


@dataclass
class DeviceWrite:
    """One claim's write: the pods to reserve it for, the allocation to record (None: the claim
    was allocated before), and what became of it."""

    claim: str  # namespace/name
    pods: list[tuple[str, str]]  # (pod key, uid), in the gang's order
    allocation: ClaimAllocation | None
    want: Obj  # the claim as it will be written (what sessions see meanwhile)
    base_rv: str
    written: bool = False  # the allocation landed (ours to give back)
    reserved: set[str] = field(default_factory=set)  # pod uids we added to reservedFor
    given_back: set[str] = field(default_factory=set)


def _reserved_uids(claim: Obj) -> list[str]:
    return [str(r.get("uid") or "") for r in (claim.get("status") or {}).get("reservedFor") or []]


def _consumer(key: str, uid: str) -> dict[str, str]:
    """A pod as ``status.reservedFor`` names it (``ResourceClaimConsumerReference``)."""
    return {"resource": "pods", "name": key.split("/", 1)[1], "uid": uid}


class DevicePreBind:
    """Plans, assumes, writes and gives back a gang's ResourceClaims; see the module docstring."""

    def __init__(self, api: ApiClient, claims: Informer, *, sync: Callable[[str], None]) -> None:
        """``sync(key)``: show the state a claim as sessions should see it."""
        self.api, self.claims = api, claims
        self.assumed = VolumeAssumptions()
        self._sync = sync

    def claim(self, key: str) -> Obj | None:
        """A claim as sessions see it."""
        return self.assumed.overlay("claim", key, self.claims.get(key))

    # ------------------------------------------------------------------ plan
    def plan(self, pods: Iterable[Obj], decisions: Mapping[str, ClaimAllocation]) -> list[DeviceWrite]:
        """The claim writes ``pods`` need, assumed at once (call it on the loop, with no await
        between the session's end and this). Raises PreBindError when a claim is gone, being
        deleted or allocated otherwise since the session."""
        by_claim: dict[str, list[tuple[str, str]]] = {}
        for p in pods:
            m = meta(p)
            pkey = f"{m.get('namespace') or 'default'}/{m.get('name')}"
            uid = str(m.get("uid") or "")
            pc = compile_pod_claims(p)
            for ref in pc.refs:
                if ref.no_claim or ref.claim_name is None:
                    continue
                by_claim.setdefault(pc.key(ref), []).append((pkey, uid))
        writes: list[DeviceWrite] = []
        for key, users in by_claim.items():
            cur = self.claim(key)
            name = key.split("/", 1)[1]
            if cur is None:
                raise PreBindError(f'resourceclaim.resource.k8s.io "{name}" not found')
            if meta(cur).get("deletionTimestamp"):
                raise PreBindError(f"claim {key} got deleted in the meantime")
            status = cur.get("status") or {}
            decided = decisions.get(key)
            if decided is not None and status.get("allocation"):
                raise PreBindError(f"claim {key} got allocated elsewhere in the meantime")
            if decided is None and not status.get("allocation"):
                raise PreBindError(f"claim {key} got deallocated elsewhere in the meantime")
            have = set(_reserved_uids(cur))
            fresh = [(k, u) for k, u in users if u not in have]
            if len(have) + len(fresh) > RESERVED_FOR_MAX:
                raise PreBindError(f"claim {key}: reservedFor would exceed {RESERVED_FOR_MAX} entries")
            want = clone(cur)
            if decided is not None:
                fins = want.setdefault("metadata", {}).setdefault("finalizers", [])
                if FINALIZER not in fins:
                    fins.append(FINALIZER)
                want.setdefault("status", {})["allocation"] = allocation_to_wire(decided.allocation)
            reserved = want.setdefault("status", {}).setdefault("reservedFor", [])
            reserved.extend(_consumer(k, u) for k, u in fresh)
            w = DeviceWrite(key, fresh, decided, want, str(meta(cur).get("resourceVersion") or ""))
            writes.append(w)
        for w in writes:
            if w.pods or w.allocation is not None:
                self.assumed.put("claim", w.claim, w.want, w.base_rv)
                self._sync(w.claim)
        return writes

    # ------------------------------------------------------------------ write
    async def run(self, writes: Sequence[DeviceWrite], pods_exist: Callable[[], bool]) -> None:
        """Write every claim (finalizer, then allocation and reservation). Raises
        PreBindError (what was written stays: :meth:`give_back` takes it off)."""
        for w in writes:
            if not w.pods and w.allocation is None:
                continue
            if not pods_exist():
                raise PreBindError("binding claims: pod does not exist any more")
            try:
                await self._write(w)
            except ApiError as exc:
                raise PreBindError(f"add allocation and reservation to claim {w.claim}: {exc}") from None

    async def _write(self, w: DeviceWrite) -> None:
        ns, name = w.claim.split("/", 1)
        cur: Obj | None = self.claims.get(w.claim)  # the informer's: the overlay is our own want
        for attempt in range(CONFLICT_RETRIES):
            if cur is None or attempt:
                cur = await self.api.get(RESOURCE_CLAIMS, name, ns)
            if meta(cur).get("deletionTimestamp"):
                raise PreBindError(f"claim {w.claim} got deleted in the meantime")
            status = cur.get("status") or {}
            if w.allocation is not None and status.get("allocation") and not w.written:
                raise PreBindError(f"claim {w.claim} got allocated elsewhere in the meantime")
            if w.allocation is None and not status.get("allocation"):
                raise PreBindError(f"claim {w.claim} got deallocated elsewhere in the meantime")
            try:
                if w.allocation is not None and FINALIZER not in (meta(cur).get("finalizers") or []):
                    upd = clone(cur)
                    upd["metadata"].setdefault("finalizers", []).append(FINALIZER)
                    cur = await self.api.replace(RESOURCE_CLAIMS, upd, ns)
                have = set(_reserved_uids(cur))
                reserved = list(status.get("reservedFor") or [])
                reserved += [_consumer(k, u) for k, u in w.pods if u not in have]
                body: Obj = {
                    "metadata": {"resourceVersion": meta(cur).get("resourceVersion")},
                    "status": {"reservedFor": reserved},
                }
                if w.allocation is not None:
                    body["status"]["allocation"] = allocation_to_wire(w.allocation.allocation)
                await self.api.patch(RESOURCE_CLAIMS, name, body, ns, subresource="status")
            except ApiError as exc:
                if exc.conflict and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
            w.written = w.allocation is not None
            w.reserved = {u for _k, u in w.pods}
            return

    # ------------------------------------------------------------------ give back
    async def give_back(self, writes: Sequence[DeviceWrite], uids: set[str] | None = None) -> None:
        """Unreserve: take the pods (all of the writes', or those of ``uids``) off the claims
        again, and the allocation of a claim written here that no pod holds any more (best
        effort: a failure is logged; the resourceclaim controller then owns the claim)."""
        for w in writes:
            mine = {u for _k, u in w.pods} if uids is None else {u for _k, u in w.pods if u in uids}
            mine -= w.given_back
            if not mine and not (uids is None and w.allocation is not None):
                continue
            w.given_back |= mine
            if uids is None or w.given_back >= {u for _k, u in w.pods}:
                self.assumed.drop("claim", w.claim)
                self._sync(w.claim)
            try:
                await self._unreserve(w, mine)
            except ApiError as exc:
                log.warning("giving back claim %s: %s", w.claim, exc)

    async def _unreserve(self, w: DeviceWrite, uids: set[str]) -> None:
        ns, name = w.claim.split("/", 1)
        for attempt in range(CONFLICT_RETRIES):
            try:
                cur = await self.api.get(RESOURCE_CLAIMS, name, ns)
            except ApiError as exc:
                if exc.not_found:
                    return
                raise
            status = cur.get("status") or {}
            reserved = [r for r in status.get("reservedFor") or [] if str(r.get("uid") or "") not in uids]
            # The allocation is ours to take off when our write landed and no pod holds it.
            drop_allocation = w.written and bool(status.get("allocation")) and not reserved
            if len(reserved) == len(status.get("reservedFor") or []) and not drop_allocation:
                return
            body: Obj = {
                "metadata": {"resourceVersion": meta(cur).get("resourceVersion")},
                "status": {"reservedFor": reserved or None},
            }
            if drop_allocation:
                body["status"]["allocation"] = None
            try:
                cur = await self.api.patch(RESOURCE_CLAIMS, name, body, ns, subresource="status")
                if drop_allocation and FINALIZER in (meta(cur).get("finalizers") or []):
                    upd = clone(cur)
                    upd["metadata"]["finalizers"] = [
                        f for f in upd["metadata"]["finalizers"] if f != FINALIZER
                    ]
                    await self.api.replace(RESOURCE_CLAIMS, upd, ns)
            except ApiError as exc:
                if exc.conflict and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
            log.info("gave back claim %s", w.claim)
            return
