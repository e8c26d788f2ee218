"""One variant measured: restart the controller and the scheduler with its flags, apply the gang,
time its pods from apply to the last bound, with the CPU seconds, latencies and writes meanwhile;
and the table of the variants' figures."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import audit
from bench.live import say
from bench.live.gangs import job_manifest
from bench.live.metrics import apiserver_stats, mean_ms, scheduler_stats
from bench.live.processes import cpu_seconds, restart, running, wait_leader, wait_ready
from bench.live.profiler import Profiler
from hyperplace.localup.kubectl import Kubectl
from hyperplace.localup.state import State
from hyperplace.runtime.api import PODS, Obj, meta
from hyperplace.runtime.informer import Informer
from hyperplace.runtime.kube import connect


@dataclass
class Run:
    """One variant's figures; times are seconds after ``kubectl apply`` began."""

    variant: str
    pods: int
    apply_s: float = 0.0
    first_pod: float = 0.0
    last_pod: float = 0.0
    first_bind: float = 0.0
    last_bind: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    ok: bool = False
    profile: str = ""
    latency: str = ""
    writes: Counter[tuple[str, str, str]] = field(default_factory=Counter)


async def watch_job(
    kubeconfig: Path,
    kubectl: Kubectl,
    namespace: str,
    pods: int,
    timeout: float,
    manifest_of: Any = job_manifest,
) -> Run:
    """Apply the Job and time its pods; timestamps are seconds after ``kubectl apply`` began."""
    api, raw = await connect(str(kubeconfig))
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    done = asyncio.Event()
    t0 = 0.0

    def seen(p: Obj) -> None:
        now = time.perf_counter() - t0
        key = f"{meta(p).get('namespace')}/{meta(p).get('name')}"
        created.setdefault(key, now)
        if (p.get("spec") or {}).get("nodeName") and key not in bound:
            bound[key] = now
            if len(bound) >= pods:
                done.set()

    kubectl.run("create", "namespace", namespace)
    inf = Informer(api, PODS, namespace)
    inf.add_handler(seen, lambda _o, n: seen(n))
    task = asyncio.create_task(inf.run())
    run = Run(namespace, pods)
    try:
        await inf.synced.wait()
        manifest = yaml.safe_dump_all(manifest_of(namespace, pods)[1:])
        t0 = time.perf_counter()
        await asyncio.to_thread(kubectl.run, "apply", "-f", "-", input=manifest)
        run.apply_s = time.perf_counter() - t0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await done.wait()
        run.ok = len(bound) >= pods
        if created:
            run.first_pod, run.last_pod = min(created.values()), max(created.values())
        if bound:
            run.first_bind, run.last_bind = min(bound.values()), max(bound.values())
        if not run.ok:
            say(f"{namespace}: only {len(created)} pods created and {len(bound)} bound within {timeout:.0f}s")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await raw.close()
    return run


def run_variant(
    state: State,
    kubectl: Kubectl,
    name: str,
    flags: tuple[list[str], list[str]],
    pods: int,
    timeout: float,
    profile: bool,
    manifest_of: Any = job_manifest,
) -> Run:
    """Restart the controller and the scheduler with ``flags``, then apply and time the gang."""
    ctl_extra, sch_extra = flags
    identity = f"e2e-{name}"
    say(f"{name}: restarting the controller {ctl_extra or ''} and the scheduler {sch_extra or ''}")
    cpid, cport = restart(state, "hyperplace-controller", ctl_extra)
    spid, sport = restart(state, "hyperplace-scheduler", [f"--identity={identity}", *sch_extra])
    wait_ready(cport, cpid, "hyperplace-controller")
    wait_leader(kubectl, "hyperplace-controller", f"_{cpid}")  # identity: <POD_NAME>_<pid>
    wait_leader(kubectl, "hyperplace-scheduler", identity)
    wait_ready(sport, spid, "hyperplace-scheduler")
    time.sleep(2.0)  # the controller's Lease and first reconciles of the restart settle
    pids = running(state)
    before = {n: cpu_seconds(p) for n, p in pids.items()}
    api_before, sch_before = apiserver_stats(kubectl), scheduler_stats(sport)
    prof = Profiler(spid, state.root / f"profile-{name}.txt") if profile else None
    t_from = time.time()
    run = asyncio.run(watch_job(Path(state.kubeconfig), kubectl, f"e2e-{name}", pods, timeout, manifest_of))
    time.sleep(2.0)  # the writes that follow the last bind (Events, PodGroup status) and the audit batch
    run.writes = audit.count_writes(state.root / "audit.log", t_from, time.time())
    run.variant = name
    run.cpu = {n: cpu_seconds(p) - before.get(n, 0.0) for n, p in pids.items()}
    api_after, sch_after = apiserver_stats(kubectl), scheduler_stats(sport)
    run.latency = (
        f"bind as the scheduler saw it {mean_ms(sch_after, sch_before, '')}, in the apiserver "
        f"{mean_ms(api_after, api_before, 'bind_')}; pod create in the apiserver "
        f"{mean_ms(api_after, api_before, 'create_')}; priority-and-fairness queue wait "
        f"{mean_ms(api_after, api_before, 'apf_')}"
    )
    if prof is not None:
        run.profile = prof.stop()
    return run


def table(runs: list[Run], load: str) -> str:
    """The report: times and rates per variant, CPU seconds, request latencies and writes."""
    head = (
        f"{'variant':<14} {'pods':>6} {'apply':>7} {'1st pod':>8} {'creation':>9} {'pods/s':>8}"
        f" {'1st bind':>9} {'binding':>8} {'binds/s':>8} {'all bound':>10}"
    )
    out = [head, "-" * len(head)]
    for r in runs:
        creation = r.last_pod - r.first_pod
        binding = r.last_bind - r.first_bind
        out.append(
            f"{r.variant:<14} {r.pods:>6} {r.apply_s:>6.2f}s {r.first_pod:>7.2f}s {creation:>8.2f}s"
            f" {r.pods / creation if creation > 0 else 0:>8.0f} {r.first_bind:>8.2f}s {binding:>7.2f}s"
            f" {r.pods / binding if binding > 0 else 0:>8.0f} {r.last_bind:>9.2f}s"
            + ("" if r.ok else "  (NOT all bound)")
        )
    out.append("")
    out.append("CPU seconds per process from apply to the last bind (the window in brackets):")
    for r in runs:
        parts = [
            f"{n.replace('hyperplace-', '')} {s:.1f}" for n, s in sorted(r.cpu.items(), key=lambda x: -x[1])
        ]
        out.append(f"  {r.variant:<12} [{r.last_bind:.1f}s] " + ", ".join(parts))
    out.append("")
    out.append("mean request latencies during the run:")
    for r in runs:
        out.append(f"  {r.variant:<12} {r.latency}")
    out.append("")
    out.append("writes from apply to 2 s after the last bind (apiserver audit log):")
    for r in runs:
        out.append(f"  {r.variant}:")
        out += audit.lines(r.writes, "    ")
    out.append(f"load average at the end: {load}")
    return "\n".join(out)
