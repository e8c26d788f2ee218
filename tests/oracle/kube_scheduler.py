"""The real kube-scheduler as an oracle: which nodes it finds feasible for a pod, and which of
them its InterPodAffinity and PodTopologySpread scores make it choose.

kube-scheduler (built by ``hack/kube-bin.sh`` from the same Go modules as the test apiserver) runs
against the test control plane with one profile, ``oracle-scheduler``, every node scored
(``percentageOfNodesToScore: 100``), no leader election, no preemption, and a filter *extender*
served here. kube-scheduler calls an extender's filter only with the nodes that passed all its
in-tree filters, so the extender records them per pod UID and answers that every one of them
failed: the pod is never bound, nothing changes in the cluster, and the recorded set is kube-
scheduler's own feasible set. When no node passes the in-tree filters the extender is not
called; the pod's ``PodScheduled`` condition then carries kube-scheduler's
``0/N nodes are available: ...`` message, and the verdict is the empty set with that message.

Each query creates a fresh pod (a generated name), so kube-scheduler's back-off of the
unschedulable pods of earlier queries never delays a verdict.

Scores: a second profile, ``oracle-scorer``, scores with InterPodAffinity and PodTopologySpread
alone (weight 1 each). Extenders serve every profile, so the filter extender lets the scorer's
pods through (every node it is shown passes), and the extender is also the *binder*
(``bindVerb``): kube-scheduler then asks it, not the apiserver, to bind the pod to the node it
chose. The ``/bind`` handler records that node and answers with an error, so nothing is bound;
kube-scheduler forgets the pod it had assumed on the node (``handleBindingCycleError``:
Unreserve, ``Cache.ForgetPod``) before it writes the pod's ``PodScheduled=False`` condition, and
the query waits for that condition and deletes the pod before the next query, so no query's
assumed pod is counted by another's.

    async with KubeSchedulerOracle(cp, api, workdir) as oracle:
        verdict = await oracle.feasible_nodes(pod)   # OracleVerdict(nodes, message, pod)
        choice = await oracle.chosen_node(pod)       # OracleChoice(node, nodes, pod)
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import re
import ssl
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from hyperplace.localup.controlplane import ControlPlane, feature_gate_args, free_port, tail

from .rest import Rest

ORACLE_SCHEDULER = "oracle-scheduler"
ORACLE_SCORER = "oracle-scorer"
# The score plugins the scorer profile keeps, each with weight 1 (what ours.our_scores adds up).
SCORE_PLUGINS = ("InterPodAffinity", "PodTopologySpread")
# What the extender answers to a bind: kube-scheduler reports it as the pod's scheduling error.
NOT_BOUND = "not bound: choice recorded by the hyperplace oracle"
# What the extender answers for every node it is shown: the pod then fits nowhere.
RECORDED = "recorded by the hyperplace oracle"
START_TIMEOUT = 60.0
VERDICT_TIMEOUT = 30.0
LOG_LINES = 60


# What kube-scheduler logs at level 10 for each score plugin and node (schedule_one.go,
# prioritizeNodes): the plugin's score times its weight, after NormalizeScore.
PLUGIN_SCORE = re.compile(
    r'"Plugin scored node for pod" pod="(?P<pod>[^"]+)" plugin="(?P<plugin>[^"]+)" '
    r'node="(?P<node>[^"]+)" score=(?P<score>-?\d+)'
)


class OracleError(AssertionError):
    """kube-scheduler did not start, died, or gave no verdict in time; the message carries the
    tail of its log."""


@dataclass(frozen=True)
class OracleVerdict:
    """kube-scheduler's verdict on one pod: the nodes that passed all its filters, and, when
    none did, its ``0/N nodes are available: ...`` message. ``pod`` is the pod as the apiserver
    stored it (defaulted and admitted): what any scheduler reads."""

    nodes: frozenset[str]
    message: str | None
    pod: dict[str, Any]


@dataclass(frozen=True)
class OracleChoice:
    """The node kube-scheduler's scorer profile chose for one pod (at random among the nodes
    with the best total score), and the feasible nodes it scored (what its filters and the
    extender's filter let through). ``pod`` is the pod as the apiserver stored it. When it chose
    none, ``node`` is None and ``message`` says why."""

    node: str | None
    nodes: frozenset[str]
    pod: dict[str, Any]
    message: str | None = None


def scheduler_config(kubeconfig: Path, extender_port: int) -> dict[str, Any]:
    """The ``KubeSchedulerConfiguration`` of the oracle."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        # Fast enough for thousands of pods' status writes and events.
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
        "leaderElection": {"leaderElect": False},
        "percentageOfNodesToScore": 100,
        "profiles": [
            {
                "schedulerName": ORACLE_SCHEDULER,
                "percentageOfNodesToScore": 100,
                # Preemption could delete existing pods and so change the cluster under the cases.
                "plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
            },
            {
                "schedulerName": ORACLE_SCORER,
                "percentageOfNodesToScore": 100,
                "plugins": {
                    "postFilter": {"disabled": [{"name": "DefaultPreemption"}]},
                    # Only the scores our scheduler computes as kube-scheduler does; the other
                    # plugins' PreScore goes too (NodeAffinity's fails on a preferred Gt/Lt
                    # value that is no integer, which the filters never read).
                    "preScore": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": name} for name in SCORE_PLUGINS],
                    },
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": name, "weight": 1} for name in SCORE_PLUGINS],
                    },
                    # Nothing may act for the chosen node before the extender's bind: VolumeBinding
                    # would bind the pod's claims (API writes) and wait for a PV controller there is
                    # none of, and its Reserve assumes those bindings.
                    "reserve": {"disabled": [{"name": "*"}]},
                    "preBind": {"disabled": [{"name": "*"}]},
                },
                "pluginConfig": [
                    # No system default constraints (a pod without constraints of its own would
                    # be spread by hostname and zone): ours does not implement them.
                    {
                        "name": "PodTopologySpread",
                        "args": {"defaultingType": "List", "defaultConstraints": []},
                    },
                    # The defaults, spelt out: ours implements hardPodAffinityWeight 1 and scores
                    # the existing pods' preferred terms.
                    {
                        "name": "InterPodAffinity",
                        "args": {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False},
                    },
                ],
            },
        ],
        "extenders": [
            {
                "urlPrefix": f"http://127.0.0.1:{extender_port}",
                "filterVerb": "filter",
                # kube-scheduler lets the first binder extender bind every pod (of every profile);
                # only the scorer's pods get that far.
                "bindVerb": "bind",
                "nodeCacheCapable": True,
                "weight": 1,
            }
        ],
    }


def pod_scheduled_false(pod: Mapping[str, Any]) -> str | None:
    """The message of a pod's ``PodScheduled=False`` condition, or None when it has none."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or "")
    return None


class KubeSchedulerOracle:
    """A kube-scheduler process and its recording extender (see the module docstring)."""

    def __init__(
        self, cp: ControlPlane, api: Rest, workdir: Path, *, verdict_timeout: float = VERDICT_TIMEOUT
    ):
        self.cp = cp
        self.api = api
        self.workdir = workdir
        self.verdict_timeout = verdict_timeout
        self.binary = cp.bin_dir / "kube-scheduler"
        self.log = workdir / "kube-scheduler.log"
        self._calls: dict[str, frozenset[str]] = {}  # pod UID -> nodes of its first filter call
        self._called = asyncio.Event()
        self._binds: dict[str, str] = {}  # pod UID -> node of its first bind call
        self._bound = asyncio.Event()
        # "namespace/name" -> plugin -> node -> score, as logged; and how far the log was read.
        self._logged: dict[str, dict[str, dict[str, int]]] = {}
        self._log_offset = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._runner: web.AppRunner | None = None
        self.extender_calls = 0

    async def __aenter__(self) -> KubeSchedulerOracle:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ process
    async def start(self) -> None:
        """Serve the extender, start kube-scheduler, wait until it is ready."""
        if not os.access(self.binary, os.X_OK):
            raise OracleError(f"{self.binary} is missing or not executable (run: bash hack/kube-bin.sh)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/filter", self._filter)
        app.router.add_post("/bind", self._bind)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        config = self.workdir / "kube-scheduler.yaml"
        config.write_text(yaml.safe_dump(scheduler_config(self.cp.kubeconfig, port)))
        health_port = free_port()
        kubeconfig = str(self.cp.kubeconfig)
        with self.log.open("ab") as fh:
            self._proc = subprocess.Popen(
                [
                    str(self.binary),
                    f"--config={config}",
                    f"--kubeconfig={kubeconfig}",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}",
                    # The test apiserver has no front-proxy CA to look up (only log noise otherwise).
                    "--authentication-skip-lookup",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={health_port}",
                    f"--cert-dir={self.workdir / 'certs'}",
                    # The control plane's gates (the Workload API and its plugins), as a cluster runs them.
                    *feature_gate_args(self.cp.bin_dir),
                    # v=2 logs each pod it could not schedule, with the reason: enough to debug.
                    "--v=2",
                    # Level 10 in schedule_one.go alone: each plugin's score of each node, for
                    # the scorer's pods (logged_scores), and nothing else of level 10.
                    "--vmodule=schedule_one=10",
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        await self._wait_ready(f"https://127.0.0.1:{health_port}/readyz")

    async def _wait_ready(self, url: str) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + START_TIMEOUT
        last = ""
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                        if resp.status == 200:
                            return
                        last = f"HTTP {resp.status}: {(await resp.text())[-300:]}"
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    last = repr(exc)
                await asyncio.sleep(0.2)
        raise OracleError(f"kube-scheduler not ready within {START_TIMEOUT:.0f}s ({last})\n{self.log_tail()}")

    def _check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise OracleError(f"kube-scheduler exited with {self._proc.returncode}\n{self.log_tail()}")

    async def stop(self) -> None:
        """Stop kube-scheduler (SIGTERM, then SIGKILL) and the extender."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def log_tail(self, lines: int = LOG_LINES) -> str:
        """The last lines of kube-scheduler's log, for failure messages."""
        return f"--- {self.log} (last {lines} lines) ---\n{tail(self.log, lines)}"

    # ------------------------------------------------------------------ extender
    async def _filter(self, request: web.Request) -> web.Response:
        args = await request.json()
        # Go's encoding/json writes the field names as they are (ExtenderArgs has no tags).
        pod = args.get("Pod") or args.get("pod") or {}
        names = args.get("NodeNames") or args.get("nodenames") or []
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        self.extender_calls += 1
        # The first call is the verdict; a pod requeued later (another pod's event) is asked again.
        self._calls.setdefault(uid, frozenset(str(n) for n in names))
        self._called.set()
        if (pod.get("spec") or {}).get("schedulerName") == ORACLE_SCORER:
            # The scorer's pods go on to be scored on every node kube-scheduler's filters passed.
            return web.json_response({"NodeNames": list(names), "FailedNodes": {}})
        return web.json_response({"NodeNames": [], "FailedNodes": {str(n): RECORDED for n in names}})

    async def _bind(self, request: web.Request) -> web.Response:
        args = await request.json()
        # ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node}: no JSON tags either.
        uid = str(args.get("PodUID") or args.get("podUID") or "")
        node = str(args.get("Node") or args.get("node") or "")
        self._binds.setdefault(uid, node)
        self._bound.set()
        # ExtenderBindingResult {Error}: a bind that failed, so the pod stays unbound.
        return web.json_response({"Error": NOT_BOUND})

    # ------------------------------------------------------------------ queries
    async def feasible_nodes(self, pod: Mapping[str, Any]) -> OracleVerdict:
        """kube-scheduler's verdict on a fresh copy of ``pod`` (see :meth:`feasible_nodes_many`)."""
        return (await self.feasible_nodes_many([pod]))[0]

    async def feasible_nodes_many(self, pods: Sequence[Mapping[str, Any]]) -> list[OracleVerdict]:
        """Create a fresh copy of each pod (a generated name, ``schedulerName: oracle-scheduler``)
        and wait for kube-scheduler's verdict on each. The pods are never bound; the caller
        deletes them with their namespace's pods."""
        stored = await asyncio.gather(*(self.api.create(self._query_pod(p)) for p in pods))
        pending = {str(p["metadata"]["uid"]): p for p in stored}
        verdicts: dict[str, OracleVerdict] = {}
        deadline = time.monotonic() + self.verdict_timeout
        while True:
            for uid in [u for u in pending if u in self._calls]:
                verdicts[uid] = OracleVerdict(self._calls[uid], None, pending.pop(uid))
            if not pending:
                break
            self._check_alive()
            if time.monotonic() > deadline:
                names = sorted(
                    f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pending.values()
                )
                raise OracleError(
                    f"kube-scheduler gave no verdict within {self.verdict_timeout:.0f}s on {names}\n"
                    + self.log_tail()
                )
            # The condition is written after the extender answered, so a pod whose condition
            # says it fits nowhere and whose UID the extender never saw passed no in-tree filter.
            for ns in {str(p["metadata"]["namespace"]) for p in pending.values()}:
                for live in await self.api.list("Pod", ns):
                    uid = str(live["metadata"]["uid"])
                    message = pod_scheduled_false(live)
                    if uid in pending and message is not None and uid not in self._calls:
                        verdicts[uid] = OracleVerdict(frozenset(), message, pending.pop(uid))
            if pending:
                self._called.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._called.wait(), 0.05)
        return [verdicts[str(p["metadata"]["uid"])] for p in stored]

    async def chosen_node(self, pod: Mapping[str, Any]) -> OracleChoice:
        """The node kube-scheduler's scorer profile chooses for a fresh copy of ``pod`` (a
        generated name, ``schedulerName: oracle-scorer``), or, when it fails to choose one, its
        message; the copy is deleted before this returns."""
        stored = await self.api.create(self._query_pod(pod, ORACLE_SCORER))
        meta = stored["metadata"]
        uid = str(meta["uid"])
        deadline = time.monotonic() + self.verdict_timeout
        failed: str | None = None
        try:
            polls = 0
            while uid not in self._binds:
                self._check_alive()
                if time.monotonic() > deadline:
                    raise OracleError(
                        f"kube-scheduler chose no node within {self.verdict_timeout:.0f}s for "
                        f"{meta['namespace']}/{meta['name']}\n{self.log_tail()}"
                    )
                polls += 1
                if polls % 5 == 0:
                    # The condition is written after a bind answered, so a condition without a
                    # bind is a failure before it (no node passed, or a plugin's error).
                    failed = pod_scheduled_false(await self.api.get(stored) or {})
                    if failed is not None and uid not in self._binds:
                        break
                    failed = None
                self._bound.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._bound.wait(), 0.05)
            # kube-scheduler writes the failed bind into the pod's condition after it forgot the
            # pod it had assumed on the node: until then the pod would count for the next query.
            while failed is None and pod_scheduled_false(await self.api.get(stored) or {}) is None:
                self._check_alive()
                if time.monotonic() > deadline:
                    raise OracleError(
                        f"kube-scheduler did not report the failed bind of {uid} within "
                        f"{self.verdict_timeout:.0f}s\n{self.log_tail()}"
                    )
                await asyncio.sleep(0.02)
        finally:
            # Before its back-off ends and kube-scheduler assumes it on a node again.
            await self.api.delete(stored)
        node = None if failed is not None else self._binds[uid]
        return OracleChoice(node, self._calls.get(uid, frozenset()), stored, failed)

    async def chosen_nodes_many(self, pods: Sequence[Mapping[str, Any]]) -> list[OracleChoice]:
        """:meth:`chosen_node` of each pod, one after the other (a pod kube-scheduler assumed on
        a node counts there until it forgets it, so queries must not overlap)."""
        return [await self.chosen_node(p) for p in pods]

    def logged_scores(self, pod_key: str) -> dict[str, dict[str, int]]:
        """The scores kube-scheduler logged when it scored the pod ``namespace/name`` (its first
        scoring): per score plugin that did not skip the pod, its weighted, normalized score of
        each feasible node. Empty when it logged none (one feasible node is not scored)."""
        with self.log.open("rb") as fh:
            fh.seek(self._log_offset)
            data = fh.read()
        # Only whole lines: the rest is read next time.
        end = data.rfind(b"\n") + 1
        self._log_offset += end
        for m in PLUGIN_SCORE.finditer(data[:end].decode(errors="replace")):
            nodes = self._logged.setdefault(m["pod"], {}).setdefault(m["plugin"], {})
            nodes.setdefault(m["node"], int(m["score"]))
        return self._logged.get(pod_key, {})

    @staticmethod
    def _query_pod(pod: Mapping[str, Any], scheduler: str = ORACLE_SCHEDULER) -> dict[str, Any]:
        out = copy.deepcopy(dict(pod))
        meta = out.setdefault("metadata", {})
        name = meta.pop("name", None) or meta.get("generateName") or "oracle"
        meta["generateName"] = f"{str(name).rstrip('-')}-"
        out.setdefault("spec", {})["schedulerName"] = scheduler
        out.pop("status", None)
        return out
