"""An in-memory API server that keeps the promises controllers depend on.

* One global, monotonically increasing resourceVersion; every write bumps it.
* ``replace`` with a stale ``metadata.resourceVersion`` fails with 409 Conflict;
  ``create`` of an existing name fails with 409 AlreadyExists; missing objects 404.
* ``list`` returns the objects and the current resourceVersion.
* ``watch`` replays history after the given resourceVersion, then streams live events;
  it sends BOOKMARKs on :meth:`FakeApi.bookmark`, ends after ``timeout_seconds``, and
  answers a resourceVersion older than the compaction point (:meth:`FakeApi.compact`)
  with an ERROR event carrying a 410 Status, like etcd compaction.
* Custom resources, pods and nodes have a status subresource: the main endpoint ignores
  ``status``, ``/status`` changes only ``status``; a custom resource's
  ``metadata.generation`` moves with ``spec``.
* ``POST pods/{name}/binding`` (``create(PODS, binding, subresource="binding")``) behaves
  like the registry's ``BindingREST``: 404 for a missing pod, 409 Conflict when the
  binding's ``metadata.uid`` precondition does not match or the pod already has a node,
  otherwise it sets ``spec.nodeName`` and ``PodScheduled=True`` and answers with a
  ``Status`` (code 201), not with an object.
* ``POST pods/{name}/eviction`` (``create(PODS, eviction, subresource="eviction")``) behaves
  like the registry's ``EvictionREST`` for a cluster without PodDisruptionBudgets: 404 for a
  missing pod, 409 Conflict when ``deleteOptions.preconditions.uid`` does not match, otherwise
  the pod is deleted at once (no kubelet grace period) and a ``Status`` (code 201) returned.
  PodDisruptionBudgets are not modelled (every eviction is allowed), nor the
  ``DisruptionTarget`` condition the real server adds; ``evicted`` keeps each evicted pod as it
  was at that moment, for assertions.
* ``create`` fills in ``metadata.name`` from ``generateName``; ``delete`` with ``uid`` is a
  precondition (409 Conflict when the name now belongs to another object).
* Merge patches follow RFC 7386; a ``metadata.resourceVersion`` in the patch is a
  precondition (409 Conflict when stale), as on a real API server.

Faults can be injected with :meth:`FakeApi.fail_next` (optionally only for one object
name), and every call is recorded in ``calls`` for assertions and in ``accesses`` as the
RBAC authorizer would see it (verb, group, resource, subresource, namespace, name).

:meth:`FakeApi.connect` gives one client process its own :class:`Connection` with fault
hooks: a ``before`` hook awaited before a call takes effect (it may sleep: a slow request,
or raise :class:`ApiError`: a refused one), an ``after`` hook awaited once it took effect
(a slow or lost answer), a per-event watch delay, and :meth:`Connection.sever` for a
process that crashed: from then on its calls fail, answers in flight are lost, and calls
that had not reached the server never do.

It lives beside the seam it implements so that the tests and the benchmarks (the chaos campaign,
``bench/chaos``) can both run the components on it; no component imports it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperplace.api.times import parse_rfc3339, rfc3339

from . import api as _api
from .api import PODS, ApiError, Obj, Resource, clone, meta, object_key


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return clone(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass(frozen=True)
class Access:
    """One API request as the RBAC authorizer sees it (``RequestInfo``)."""

    verb: str  # get, list, watch, create, update, patch, delete
    group: str
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None

    @property
    def resource_path(self) -> str:
        """``resource`` or ``resource/subresource``, as RBAC rules name it."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def access_of(
    verb: str,
    res: Resource,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> Access:
    """The :class:`Access` of a call on ``res`` (namespace dropped for cluster-scoped kinds)."""
    return Access(verb, res.group, res.plural, subresource, namespace if res.namespaced else None, name)


@dataclass
class _Watcher:
    res: Resource
    namespace: str | None
    queue: asyncio.Queue[Obj | None] = field(default_factory=asyncio.Queue)


class FakeApi:
    def __init__(self) -> None:
        self.rv = 0
        self.objects: dict[str, dict[str, Obj]] = {}
        self.history: list[tuple[int, str, str, Obj]] = []  # (rv, plural, type, object)
        self.compacted = 0
        self.calls: list[tuple[str, str, str]] = []
        self.accesses: list[Access] = []
        self._watchers: list[_Watcher] = []
        self._faults: dict[str, list[ApiError]] = {}
        self._named_faults: dict[tuple[str, str], list[ApiError]] = {}
        self._uids = itertools.count(1)
        self._suffixes = itertools.count(1)
        # Plurals whose CRD declares no status subresource (Volcano's PodGroup CRD).
        self.no_status_subresource: set[str] = set()
        # The server's clock, for creationTimestamp (as the apiserver stamps it). A fixed time by
        # default so tests are reproducible; a harness with its own clock sets this, and must
        # give the scheduler the same clock (its waits are measured from creationTimestamp).
        self.clock: Callable[[], str] = lambda: "2026-01-01T00:00:00Z"
        self.evicted: list[Obj] = []  # pods evicted through pods/eviction, as they were then
        # Nodes whose kubelet is unreachable: a pod bound to one, deleted with a grace period,
        # stays Terminating (deletionTimestamp set) until it is deleted with grace 0.
        self.unreachable_nodes: set[str] = set()

    # -- test controls ------------------------------------------------------------------------

    def fail_next(
        self, op: str, status: int, reason: str = "", times: int = 1, *, name: str | None = None
    ) -> None:
        """Make the next ``times`` calls of ``op`` (list, watch, create, create/binding,
        patch, ...) fail; with ``name``, only calls on the object of that name."""
        errors = [ApiError(status, reason, "injected") for _ in range(times)]
        if name is None:
            self._faults.setdefault(op, []).extend(errors)
        else:
            self._named_faults.setdefault((op, name), []).extend(errors)

    def compact(self) -> None:
        """Forget all history; watchers from older resourceVersions get 410 Gone."""
        self.compacted = self.rv
        self.history.clear()
        for w in self._watchers:
            w.queue.put_nowait(_gone(self.rv))

    def bookmark(self) -> None:
        for w in self._watchers:
            obj = {
                "apiVersion": w.res.api_version,
                "kind": w.res.kind,
                "metadata": {"resourceVersion": str(self.rv)},
            }
            w.queue.put_nowait({"type": "BOOKMARK", "object": obj})

    def disconnect_watchers(self) -> None:
        for w in self._watchers:
            w.queue.put_nowait(None)

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    def seed(self, res: Resource, obj: Mapping[str, Any]) -> Obj:
        """Store an object directly (no fault injection, no call record)."""
        return self._store_new(res, clone(dict(obj)))

    def peek(self, res: Resource, key: str) -> Obj | None:
        return self.objects.get(store_name(res), {}).get(key)

    def connect(
        self,
        before: Callable[[Access], Awaitable[None]] | None = None,
        after: Callable[[Access], Awaitable[None]] | None = None,
        watch_delay: Callable[[], float] | None = None,
    ) -> Connection:
        """A client process's own connection to this server, with fault hooks."""
        return Connection(self, before, after, watch_delay)

    # -- internals ------------------------------------------------------------------------------

    def _check_fault(self, op: str, name: str | None = None) -> None:
        named = self._named_faults.get((op, name)) if name is not None else None
        if named:
            raise named.pop(0)
        faults = self._faults.get(op)
        if faults:
            raise faults.pop(0)

    def _bucket(self, res: Resource) -> dict[str, Obj]:
        return self.objects.setdefault(store_name(res), {})

    def _emit(self, res: Resource, etype: str, obj: Obj) -> None:
        self.history.append((self.rv, store_name(res), etype, clone(obj)))
        for w in self._watchers:
            if store_name(w.res) == store_name(res) and _in_namespace(obj, w.namespace):
                w.queue.put_nowait({"type": etype, "object": clone(obj)})

    def _bump(self, obj: Obj) -> None:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)

    def _store_new(self, res: Resource, obj: Obj) -> Obj:
        m = obj.setdefault("metadata", {})
        if not res.namespaced:
            m.pop("namespace", None)
        key = object_key(obj)
        if key in self._bucket(res):
            raise ApiError(409, "AlreadyExists", f'{res.plural} "{m.get("name")}" already exists')
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        m["uid"] = f"uid-{next(self._uids)}"
        m["creationTimestamp"] = self.clock()
        if res.custom:
            m["generation"] = 1
        self._bump(obj)
        self._bucket(res)[key] = obj
        self._emit(res, "ADDED", obj)
        return clone(obj)

    def _existing(self, res: Resource, name: str, namespace: str | None) -> tuple[str, Obj]:
        key = f"{namespace}/{name}" if res.namespaced and namespace else name
        cur = self._bucket(res).get(key)
        if cur is None:
            raise ApiError(404, "NotFound", f'{res.plural} "{name}" not found')
        return key, cur

    def _write(self, res: Resource, key: str, old: Obj, new: Obj) -> Obj:
        if res.custom and old.get("spec") != new.get("spec"):
            new["metadata"]["generation"] = int(meta(old).get("generation") or 1) + 1
        # deletionTimestamp is the apiserver's to set (by a delete), never a client's to change.
        if meta(old).get("deletionTimestamp"):
            new["metadata"]["deletionTimestamp"] = meta(old)["deletionTimestamp"]
        else:
            new["metadata"].pop("deletionTimestamp", None)
        self._bump(new)
        if meta(new).get("deletionTimestamp") and not meta(new).get("finalizers"):
            # The last finalizer of an object being deleted is gone: the object goes.
            del self._bucket(res)[key]
            self._emit(res, "DELETED", new)
            return clone(new)
        self._bucket(res)[key] = new
        self._emit(res, "MODIFIED", new)
        return clone(new)

    def _mark_deleting(self, res: Resource, key: str, cur: Obj, grace: int) -> None:
        if meta(cur).get("deletionTimestamp"):
            return
        new = clone(cur)
        # The time the grace period ends, as the apiserver writes it.
        now = parse_rfc3339(self.clock())
        new["metadata"]["deletionTimestamp"] = rfc3339(now + grace) if now is not None else self.clock()
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        self._bump(new)
        self._bucket(res)[key] = new
        self._emit(res, "MODIFIED", new)

    def begin_graceful_delete(self, res: Resource, name: str, namespace: str | None = None) -> None:
        """What a delete with a grace period does to a pod on a node: it is marked and stays
        until its kubelet deletes it (grace 0) once its containers stopped."""
        key, cur = self._existing(res, name, namespace)
        self._mark_deleting(res, key, cur, 30)

    # -- the ApiClient protocol -----------------------------------------------------------------

    async def list(
        self, res: Resource, namespace: str | None = None, *, resource_version: str | None = None
    ) -> tuple[list[Obj], str]:
        self.calls.append(("list", res.plural, namespace or ""))
        self.accesses.append(access_of("list", res, namespace))
        self._check_fault("list")
        items = [clone(o) for o in self._bucket(res).values() if _in_namespace(o, namespace)]
        return items, str(self.rv)

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[Obj]:
        self.calls.append(("watch", res.plural, resource_version))
        self.accesses.append(access_of("watch", res, namespace))
        self._check_fault("watch")
        since = int(resource_version or 0)
        if since < self.compacted:
            yield _gone(self.rv)
            return
        w = _Watcher(res, namespace)
        for rv, plural, etype, obj in self.history:
            if rv > since and plural == store_name(res) and _in_namespace(obj, namespace):
                w.queue.put_nowait({"type": etype, "object": clone(obj)})
        self._watchers.append(w)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds if timeout_seconds else None
        try:
            while True:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return
                try:
                    async with asyncio.timeout(remaining):  # wait_for can swallow cancels on 3.11
                        event = await w.queue.get()
                except TimeoutError:
                    return
                if event is None:
                    return
                if event["type"] == "BOOKMARK" and not allow_bookmarks:
                    continue
                yield event
                if event["type"] == "ERROR":
                    return
        finally:
            self._watchers.remove(w)

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        self.calls.append(("get", res.plural, name))
        self.accesses.append(access_of("get", res, namespace, name))
        self._check_fault("get")
        return clone(self._existing(res, name, namespace)[1])

    async def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        name = str(meta(obj).get("name", ""))
        ns = namespace or meta(obj).get("namespace")
        if subresource is not None:
            self.calls.append((f"create/{subresource}", res.plural, name))
            self.accesses.append(access_of("create", res, ns, name, subresource))
            self._check_fault(f"create/{subresource}", name)
            if res.plural == "pods" and subresource == "binding":
                return self._bind(obj, namespace or meta(obj).get("namespace"))
            if res.plural == "pods" and subresource == "eviction":
                return self._evict(obj, namespace or meta(obj).get("namespace"))
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({subresource})"
            )
        self.calls.append(("create", res.plural, name))
        # RBAC cannot see the name of an object being created (resourceNames never match).
        self.accesses.append(access_of("create", res, ns))
        self._check_fault("create", name)
        new = clone(dict(obj))
        m = new.setdefault("metadata", {})
        if not m.get("name") and m.get("generateName"):
            # As the registry does: generateName plus a 5-character suffix (here a counter).
            m["name"] = f"{m['generateName']}{next(self._suffixes):05x}"
        if res.namespaced:
            m["namespace"] = namespace or meta(obj).get("namespace")
        if res.custom:
            new.pop("status", None)  # status is only writable through /status
        return self._store_new(res, new)

    def _bind(self, binding: Mapping[str, Any], namespace: str | None) -> Obj:
        """The pod registry's BindingREST.Create (assignPod + setPodHostAndAnnotations)."""
        name = str(meta(binding).get("name", ""))
        key, cur = self._existing(PODS, name, namespace)
        conflict = f'Operation cannot be fulfilled on pods/binding "{name}": '
        want_uid = meta(binding).get("uid")
        if want_uid and want_uid != meta(cur).get("uid"):
            raise ApiError(
                409,
                "Conflict",
                conflict + f"Precondition failed: UID in precondition: {want_uid}, "
                f"UID in object meta: {meta(cur).get('uid')}",
            )
        target = binding.get("target") or {}
        node = str(target.get("name") or "")
        if not node:
            raise ApiError(422, "Invalid", "target.name: Required value")
        spec = cur.get("spec") or {}
        if spec.get("nodeName"):
            raise ApiError(
                409, "Conflict", conflict + f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        if meta(cur).get("deletionTimestamp"):
            raise ApiError(
                409, "Conflict", conflict + f"pod {name} is being deleted, cannot be assigned to a host"
            )
        new = clone(cur)
        new.setdefault("spec", {})["nodeName"] = node
        ann = meta(binding).get("annotations") or {}
        if ann:
            new["metadata"].setdefault("annotations", {}).update(ann)
        conds = [
            c
            for c in (new.setdefault("status", {}).get("conditions") or [])
            if c.get("type") != "PodScheduled"
        ]
        # The apiserver stamps the binding with its own clock, as it stamps creations.
        conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": self.clock()})
        new["status"]["conditions"] = conds
        self._write(PODS, key, cur, new)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _evict(self, eviction: Mapping[str, Any], namespace: str | None) -> Obj:
        """The pod registry's EvictionREST.Create, without PodDisruptionBudgets."""
        name = str(meta(eviction).get("name", ""))
        key, cur = self._existing(PODS, name, namespace)
        pre = ((eviction.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if pre and pre != meta(cur).get("uid"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on Pod "{name}": Precondition failed: UID in precondition: '
                f"{pre}, UID in object meta: {meta(cur).get('uid')}",
            )
        self.evicted.append(clone(cur))
        del self._bucket(PODS)[key]
        self._bump(cur)
        self._emit(PODS, "DELETED", cur)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    async def replace(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        name = str(meta(obj).get("name", ""))
        self.calls.append(("replace", res.plural, name))
        self.accesses.append(access_of("update", res, namespace or meta(obj).get("namespace"), name))
        self._check_fault("replace")
        key, cur = self._existing(res, name, namespace or meta(obj).get("namespace"))
        sent_rv = meta(obj).get("resourceVersion")
        if sent_rv and sent_rv != meta(cur).get("resourceVersion"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.plural} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        new = clone(dict(obj))
        for k in ("uid", "creationTimestamp", "generation"):
            if k in cur["metadata"]:
                new["metadata"][k] = cur["metadata"][k]
        if self._has_status(res):
            new["status"] = clone(cur.get("status"))
            if new["status"] is None:
                new.pop("status")
        return self._write(res, key, cur, new)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        self.calls.append(("patch" + (f"/{subresource}" if subresource else ""), res.plural, name))
        self.accesses.append(access_of("patch", res, namespace, name, subresource))
        self._check_fault("patch" + (f"/{subresource}" if subresource else ""), name)
        self._check_fault("patch", name)
        if subresource == "status" and not self._has_status(res):
            # What a real apiserver answers for an unserved subresource: a bare 404.
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        key, cur = self._existing(res, name, namespace)
        sent_rv = meta(patch).get("resourceVersion")
        if sent_rv and sent_rv != meta(cur).get("resourceVersion"):
            # A resourceVersion in a merge patch is a precondition, as in an update.
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.plural} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        if subresource == "status":
            patch = {"status": patch.get("status")} if "status" in patch else {}
        elif self._has_status(res):
            patch = {k: v for k, v in patch.items() if k != "status"}
        new = merge_patch(cur, patch)
        new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        return self._write(res, key, cur, new)

    def _has_status(self, res: Resource) -> bool:
        return _has_status_subresource(res) and res.plural not in self.no_status_subresource

    async def api_resources(self, api_version: str) -> tuple[str, ...]:
        """Discovery: the resources of ``api_version`` this fake knows, with ``/status``."""
        out: tuple[str, ...] = ()
        for res in vars(_api).values():
            if isinstance(res, Resource) and res.api_version == api_version:
                out += (res.plural,)
                if self._has_status(res):
                    out += (f"{res.plural}/status",)
        return out

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        self.calls.append(("delete", res.plural, name))
        self.accesses.append(access_of("delete", res, namespace, name))
        self._check_fault("delete")
        key, cur = self._existing(res, name, namespace)
        if uid is not None and meta(cur).get("uid") != uid:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta(cur).get('uid')}",
            )
        if meta(cur).get("finalizers"):
            # Finalizers hold the object: it is marked (once) and stays until they are removed.
            self._mark_deleting(res, key, cur, 0)
            return
        if res is PODS and grace_period_seconds != 0:
            grace = _pod_grace(cur, grace_period_seconds)
            if grace and (cur.get("spec") or {}).get("nodeName") in self.unreachable_nodes:
                # Nobody finishes it: it stays Terminating until a delete with grace 0.
                self._mark_deleting(res, key, cur, grace)
                return
        del self._bucket(res)[key]
        self._bump(cur)
        self._emit(res, "DELETED", cur)


class Severed(ConnectionError):
    """The client process behind this connection is gone."""


class Connection:
    """One client process's connection to a :class:`FakeApi` (an ``ApiClient``).

    Each call runs ``before`` (may sleep or raise: the request is slow or refused), takes
    effect on the server atomically, then runs ``after`` (the answer is slow). After
    :meth:`sever` (the process crashed) every call raises :class:`Severed`: a request
    still waiting in ``before`` never reaches the server, one waiting in ``after`` took
    effect but its answer is lost, and open watches end.
    """

    def __init__(
        self,
        server: FakeApi,
        before: Callable[[Access], Awaitable[None]] | None = None,
        after: Callable[[Access], Awaitable[None]] | None = None,
        watch_delay: Callable[[], float] | None = None,
    ) -> None:
        self.server = server
        self.before, self.after, self.watch_delay = before, after, watch_delay
        self.severed = False

    def sever(self) -> None:
        """The process is gone: see the class docstring."""
        self.severed = True

    def _check(self) -> None:
        if self.severed:
            raise Severed("connection severed")

    async def _call(self, access: Access, op: Callable[[], Awaitable[Any]]) -> Any:
        self._check()
        if self.before is not None:
            await self.before(access)
        self._check()
        out = await op()  # the fake server does not suspend inside a call: atomic
        if self.after is not None:
            await self.after(access)
        self._check()
        return out

    async def list(
        self, res: Resource, namespace: str | None = None, *, resource_version: str | None = None
    ) -> tuple[list[Obj], str]:
        out: tuple[list[Obj], str] = await self._call(
            access_of("list", res, namespace),
            lambda: self.server.list(res, namespace, resource_version=resource_version),
        )
        return out

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[Obj]:
        self._check()
        if self.before is not None:
            await self.before(access_of("watch", res, namespace))
        self._check()
        stream = self.server.watch(
            res,
            namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
        )
        if self.watch_delay is None:
            try:
                async for event in stream:
                    self._check()
                    yield event
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            return
        # A network's latency: each event arrives ``watch_delay()`` after the server sent it,
        # in order. (Sleeping before each event in turn would add the delays up: a backlog
        # that grows with the event rate, which no network has.)
        delay_of = self.watch_delay
        loop = asyncio.get_running_loop()
        arrived: asyncio.Queue[tuple[float, Obj] | BaseException | None] = asyncio.Queue()

        async def receive() -> None:
            try:
                async for event in stream:
                    arrived.put_nowait((loop.time() + max(0.0, delay_of()), event))
                arrived.put_nowait(None)
            except Exception as exc:  # the stream's error reaches the reader, in its turn
                arrived.put_nowait(exc)
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()

        receiver = asyncio.create_task(receive())
        due = 0.0
        try:
            while True:
                item = await arrived.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                due = max(due, item[0])
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                self._check()
                yield item[1]
        finally:
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        out: Obj = await self._call(
            access_of("get", res, namespace, name), lambda: self.server.get(res, name, namespace)
        )
        return out

    async def create(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        ns = namespace or meta(obj).get("namespace")
        name = str(meta(obj).get("name", "")) if subresource else None
        out: Obj = await self._call(
            access_of("create", res, ns, name, subresource),
            lambda: self.server.create(res, obj, namespace, subresource=subresource),
        )
        return out

    async def replace(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        ns = namespace or meta(obj).get("namespace")
        out: Obj = await self._call(
            access_of("update", res, ns, str(meta(obj).get("name", ""))),
            lambda: self.server.replace(res, obj, namespace),
        )
        return out

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        out: Obj = await self._call(
            access_of("patch", res, namespace, name, subresource),
            lambda: self.server.patch(res, name, patch, namespace, subresource=subresource),
        )
        return out

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        await self._call(
            access_of("delete", res, namespace, name),
            lambda: self.server.delete(
                res, name, namespace, uid=uid, grace_period_seconds=grace_period_seconds
            ),
        )


def _pod_grace(pod: Mapping[str, Any], given: int | None) -> int:
    """The grace period a pod's delete gets, as the pod registry's ``CheckGracefulDelete``
    decides it: the one given, else the pod's ``terminationGracePeriodSeconds`` (30 when unset);
    0 for a pod on no node or one that finished."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    if given is not None:
        return given
    return int(spec.get("terminationGracePeriodSeconds", 30) or 0)


def store_name(res: Resource) -> str:
    """Where the fake keeps a resource's objects: the plural, qualified by the group for the
    built-in groups whose plurals Volcano's reuse (batch/v1 ``jobs`` beside Volcano's Jobs)."""
    qualified = res.group in ("batch", "apps") or res == _api.K8S_PODGROUPS  # beside Volcano's podgroups
    return f"{res.plural}.{res.group}" if qualified else res.plural


def _has_status_subresource(res: Resource) -> bool:
    return (
        res.custom
        or res.plural in ("pods", "nodes", "persistentvolumes", "persistentvolumeclaims")
        or res in (_api.K8S_PODGROUPS, _api.RESOURCE_CLAIMS)
    )


def _in_namespace(obj: Mapping[str, Any], namespace: str | None) -> bool:
    return namespace is None or meta(obj).get("namespace") == namespace


def _gone(rv: int) -> Obj:
    return {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": "Expired",
            "code": 410,
            "message": f"too old resource version (current {rv})",
        },
    }
