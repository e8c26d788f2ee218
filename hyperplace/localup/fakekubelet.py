"""A fake kubelet for every Node of a control plane that has no real one (kwok's idea, status only).

For each Node it reports ``Ready=True`` and renews the Node's Lease in ``kube-node-lease``, so
kube-controller-manager's node lifecycle controller keeps the Node Ready and untainted. For each
pod bound to a Node it writes what a kubelet writes once the containers run (phase Running,
Ready conditions, container statuses, pod IP), so Volcano Job phases progress. A pod being
deleted (``deletionTimestamp`` set) is removed with grace period 0, as a kubelet does once the
containers have stopped. Nothing runs: no containers, no volumes, no probes.

A node's kubelet can be **stopped**, as if the machine died: its Lease is no longer renewed, its
Ready condition no longer refreshed, and its pods are no longer started, reported or finished (a
pod deleted on it stays Terminating, ``deletionTimestamp`` set, until someone deletes it with grace
period 0). kube-controller-manager's node lifecycle controller then marks the Node Ready=Unknown
and taints it ``node.kubernetes.io/unreachable``. **Started** again, the kubelet reports the Node
Ready at once, renews its Lease, reports its pods Running again and finishes the deletions that
waited. In-process: :meth:`FakeKubelet.stop_node` and :meth:`FakeKubelet.start_node`; across
processes, the Node's annotation ``hyperplace.io/fake-kubelet: stopped`` (set and removed by
``hack/local-up.sh node stop|start NAME``).

    python -m hyperplace.localup.fakekubelet --kubeconfig FILE

:func:`running_status` is also what the integration tests write when they play the kubelet.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from hyperplace.api.times import micro_time, rfc3339
from hyperplace.runtime import flags
from hyperplace.runtime.api import LEASES, NODES, PODS, ApiClient, ApiError, Obj, meta, object_key
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.process import close_client, stop_on_signals

log = logging.getLogger("hyperplace.fakekubelet")

NODE_LEASE_NAMESPACE = "kube-node-lease"
# The kubelet's defaults: a 40 s Lease renewed every 10 s; node status refreshed every 5 min
# even when nothing changed (nodeStatusReportFrequency).
LEASE_SECONDS = 40
RENEW_SECONDS = 10.0
STATUS_SECONDS = 300.0
# A Node annotated so has a stopped kubelet (see the module docstring).
STOP_ANNOTATION = "hyperplace.io/fake-kubelet"
STOPPED = "stopped"


def _ip(prefix: str, key: str) -> str:
    """A stable made-up address in ``prefix``.x.y for ``key``."""
    h = hashlib.sha256(key.encode()).digest()
    return f"{prefix}.{h[0]}.{max(1, h[1])}"


def node_ready_status(node: Mapping[str, Any], now: str | None = None) -> dict[str, Any]:
    """The status part a kubelet keeps writing: Ready and the three pressure conditions, and the
    node's address. Capacity and allocatable are left as created."""
    now = now or rfc3339()
    name = str(meta(node).get("name", ""))
    old = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}

    def cond(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        prev = old.get(kind) or {}
        since = prev.get("lastTransitionTime") if prev.get("status") == status else None
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": since or now,
        }

    return {
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "fake kubelet"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "fake kubelet"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "fake kubelet"),
            cond(
                "Ready", "True", "KubeletReady", "fake kubelet (hyperplace local-up) is posting ready status"
            ),
        ],
        "addresses": [
            {"type": "InternalIP", "address": _ip("10.0", name)},
            {"type": "Hostname", "address": name},
        ],
    }


def running_status(pod: Mapping[str, Any], now: str | None = None) -> dict[str, Any]:
    """What a kubelet reports once every container of ``pod`` runs (kwok's pod-ready stage)."""
    now = now or rfc3339()
    spec = pod.get("spec") or {}
    key = object_key(pod)
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled")
    ]
    pod_ip = _ip("10.244", key)
    return {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": _ip("10.0", str(spec.get("nodeName", ""))),
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": "",
                "containerID": f"fake://{hashlib.sha256((key + c.get('name', '')).encode()).hexdigest()[:16]}",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": now}},
            }
            for c in spec.get("containers") or []
        ],
    }


def _annotated_stopped(node: Mapping[str, Any]) -> bool:
    return (meta(node).get("annotations") or {}).get(STOP_ANNOTATION) == STOPPED


def _node_is_ready(node: Mapping[str, Any]) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


class FakeKubelet:
    """Plays the kubelet of every Node the informer sees (see the module docstring)."""

    def __init__(
        self,
        api: ApiClient,
        *,
        delete_pod: Any = None,
        renew_seconds: float = RENEW_SECONDS,
        status_seconds: float = STATUS_SECONDS,
        workers: int = 4,
    ) -> None:
        self.api = api
        self.nodes = Informer(api, NODES)
        self.pods = Informer(api, PODS)
        # ``delete_pod(namespace, name, uid)`` deletes with grace period 0 and a uid precondition
        # (the ApiClient seam has no delete options); False when the pod was gone already.
        self._delete_pod = delete_pod
        self._renew = renew_seconds
        self._status_every = status_seconds
        self._workers = workers
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._queued: set[tuple[str, str]] = set()
        self._status_at: dict[str, float] = {}
        # Nodes whose kubelet is stopped, and of those the ones stopped by their annotation.
        self.stopped: set[str] = set()
        self._stopped_by_annotation: set[str] = set()
        self.pods.add_index("node", lambda o: [n] if (n := (o.get("spec") or {}).get("nodeName")) else [])
        self.nodes.add_handler(on_add=self._node_changed, on_update=lambda _o, n: self._node_changed(n))
        self.pods.add_handler(on_add=self._pod_changed, on_update=lambda _o, n: self._pod_changed(n))

    # -- a node's kubelet stopped and started ---------------------------------------------------

    def stop_node(self, name: str) -> None:
        """The node's kubelet stops: no Lease renewal, no status, its pods left as they are."""
        if name not in self.stopped:
            self.stopped.add(name)
            log.info("node %s: kubelet stopped", name)

    def start_node(self, name: str) -> None:
        """The node's kubelet starts again: the Node reported Ready and its Lease renewed at once,
        its pods started or reported Running again, the deletions that waited finished."""
        if name not in self.stopped:
            return
        self.stopped.discard(name)
        self._stopped_by_annotation.discard(name)
        log.info("node %s: kubelet started", name)
        self._enqueue(("restart", name))
        for pod in self.pods.by_index("node", name):
            if (pod.get("status") or {}).get("phase") == "Running" and not meta(pod).get("deletionTimestamp"):
                # Running before the node stopped (the node lifecycle controller marked it not
                # Ready meanwhile): reported again.
                self._enqueue(("report", object_key(pod)))
            else:
                self._pod_changed(pod)

    # -- what needs doing -------------------------------------------------------------------

    def _enqueue(self, item: tuple[str, str]) -> None:
        if item not in self._queued:
            self._queued.add(item)
            self._queue.put_nowait(item)

    def _node_changed(self, node: Obj) -> None:
        name = object_key(node)
        if _annotated_stopped(node):
            if name not in self.stopped:
                self.stop_node(name)
                self._stopped_by_annotation.add(name)
        elif name in self._stopped_by_annotation:
            self.start_node(name)
        if name in self.stopped:
            return
        if not _node_is_ready(node):
            self._enqueue(("node", name))

    def _pod_changed(self, pod: Obj) -> None:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        node = spec.get("nodeName")
        if not node or self.nodes.get(node) is None or node in self.stopped:
            return
        if meta(pod).get("deletionTimestamp"):
            self._enqueue(("delete", object_key(pod)))
        elif status.get("phase") in (None, "Pending"):
            self._enqueue(("start", object_key(pod)))

    def _stopped_under(self, pod: Obj | None) -> bool:
        return pod is not None and (pod.get("spec") or {}).get("nodeName") in self.stopped

    # -- doing it ---------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            self._queued.discard(item)
            kind, key = item
            try:
                if kind == "node":
                    await self._post_node_status(key)
                elif kind == "restart":
                    await self._renew_lease(key)
                    await self._post_node_status(key)
                elif kind == "start":
                    await self._start_pod(key)
                elif kind == "report":
                    await self._report_pod(key)
                elif kind == "delete":
                    await self._finish_deletion(key)
            except ApiError as exc:
                if not exc.not_found:
                    log.warning("%s %s: %s; retrying", kind, key, exc)
                    await asyncio.sleep(1)
                    self._enqueue(item)
            except Exception:
                log.exception("%s %s failed; retrying", kind, key)
                await asyncio.sleep(1)
                self._enqueue(item)

    async def _post_node_status(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None or name in self.stopped:
            return
        await self.api.patch(NODES, name, {"status": node_ready_status(node)}, subresource="status")
        self._status_at[name] = asyncio.get_running_loop().time()
        log.info("node %s: Ready", name)

    async def _start_pod(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or meta(pod).get("deletionTimestamp") or self._stopped_under(pod):
            return
        if (pod.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        await self._write_running(pod)

    async def _report_pod(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or meta(pod).get("deletionTimestamp") or self._stopped_under(pod):
            return
        if (pod.get("status") or {}).get("phase") != "Running":
            return
        await self._write_running(pod)

    async def _write_running(self, pod: Obj) -> None:
        ns, name = str(meta(pod).get("namespace")), str(meta(pod).get("name"))
        # A uid precondition in the patch: a pod deleted and recreated under the same name
        # meanwhile is left for its own event.
        patch = {"metadata": {"uid": meta(pod).get("uid")}, "status": running_status(pod)}
        await self.api.patch(PODS, name, patch, ns, subresource="status")
        log.info("pod %s on %s: Running", object_key(pod), (pod.get("spec") or {}).get("nodeName"))

    async def _finish_deletion(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or self._delete_pod is None or self._stopped_under(pod):
            return
        m = meta(pod)
        if await self._delete_pod(str(m.get("namespace")), str(m.get("name")), str(m.get("uid"))):
            log.info("pod %s: deleted (containers stopped)", key)

    async def _heartbeat(self) -> None:
        """Renew every Node's Lease each ``renew_seconds``; refresh its status now and then."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            for node in self.nodes.objects():
                name = str(meta(node).get("name"))
                if name in self.stopped:
                    continue
                try:
                    await self._renew_lease(name)
                    if started - self._status_at.get(name, 0.0) >= self._status_every:
                        await self._post_node_status(name)
                except ApiError as exc:
                    if not exc.not_found:
                        log.warning("heartbeat of node %s: %s", name, exc)
            await asyncio.sleep(max(0.0, self._renew - (loop.time() - started)))

    async def _renew_lease(self, name: str) -> None:
        spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_time()}
        try:
            await self.api.patch(LEASES, name, {"spec": spec}, NODE_LEASE_NAMESPACE)
        except ApiError as exc:
            if not exc.not_found:
                raise
            node = self.nodes.get(name) or {}
            owner = {
                "apiVersion": "v1",
                "kind": "Node",
                "name": name,
                "uid": meta(node).get("uid"),
            }
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                # Owned by the Node, as the kubelet does: deleting the Node deletes its Lease.
                "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": [owner]},
                "spec": spec,
            }
            with contextlib.suppress(ApiError):
                await self.api.create(LEASES, lease, NODE_LEASE_NAMESPACE)

    async def run(self) -> None:
        """Until cancelled."""
        tasks = [asyncio.create_task(self.nodes.run()), asyncio.create_task(self.pods.run())]
        try:
            await self.nodes.synced.wait()
            await self.pods.synced.wait()
            # Pods seen before their Node was in the cache: look at them again.
            for pod in self.pods.objects():
                self._pod_changed(pod)
            tasks += [asyncio.create_task(self._work()) for _ in range(self._workers)]
            tasks.append(asyncio.create_task(self._heartbeat()))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _main(args: argparse.Namespace) -> None:
    # lazy: kubernetes-asyncio loads only for a process that talks to a real API server
    from kubernetes_asyncio import client as kclient

    from hyperplace.runtime.kube import connect

    api, raw = await connect(args.kubeconfig)
    core = kclient.CoreV1Api(raw)

    async def delete_pod(namespace: str, name: str, uid: str) -> bool:
        body = kclient.V1DeleteOptions(grace_period_seconds=0, preconditions=kclient.V1Preconditions(uid=uid))
        try:
            resp: Any = await core.delete_namespaced_pod(name, namespace, body=body, _preload_content=False)
            resp.release()
        except kclient.ApiException as exc:
            # Gone already (404), or a new pod of that name (409 precondition): nothing to do.
            if exc.status not in (404, 409):
                raise ApiError(exc.status or 0, str(exc.reason), str(exc.body)) from exc
            return False
        return True

    kubelet = FakeKubelet(
        api, delete_pod=delete_pod, renew_seconds=args.renew_interval, status_seconds=args.status_interval
    )
    stop = asyncio.Event()
    task = asyncio.create_task(kubelet.run())
    try:
        with stop_on_signals(stop):
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await close_client(raw)


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``python -m hyperplace.localup.fakekubelet``."""
    p = flags.parser(
        "hyperplace-fake-kubelet",
        "hyperplace-fake-kubelet: report every Node Ready and every bound pod Running (no containers).",
    )
    flags.add_kubeconfig(p)
    p.add_argument(
        "--renew-interval",
        metavar="DURATION",
        type=flags.duration,
        default=RENEW_SECONDS,
        help="how often each Node's Lease is renewed",
    )
    p.add_argument(
        "--status-interval",
        metavar="DURATION",
        type=flags.duration,
        default=STATUS_SECONDS,
        help="how often each Node's Ready condition is refreshed",
    )
    flags.add_log_level(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
