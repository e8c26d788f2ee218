"""Latencies from the apiserver's and the scheduler's Prometheus metrics: sums and counts read
before and after a run, and their mean in between."""

from __future__ import annotations

import contextlib
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from hyperplace.localup.kubectl import Kubectl


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample in a Prometheus text exposition."""
    return [
        (s.name, dict(s.labels), float(s.value))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    ]


def apiserver_stats(kubectl: Kubectl) -> dict[str, float]:
    """Sums and counts of the apiserver's own latency of pod binds and creates, and of the time
    requests waited in its priority-and-fairness queues."""
    out: dict[str, float] = {}
    text = kubectl.run("get", "--raw", "/metrics", check=False).stdout
    for name, labels, value in samples(text):
        key = None
        if (
            name.startswith("apiserver_request_duration_seconds_")
            and labels.get("resource") == "pods"
            and labels.get("verb") == "POST"
            and labels.get("subresource") in ("", "binding")
        ):
            key = "bind_" if labels.get("subresource") == "binding" else "create_"
        elif name.startswith("apiserver_flowcontrol_request_wait_duration_seconds_"):
            key = "apf_"
        if key is not None and name.endswith(("_sum", "_count")):
            key += name.rsplit("_", 1)[1]
            out[key] = out.get(key, 0.0) + value
    return out


def scheduler_stats(port: int) -> dict[str, float]:
    """The scheduler's own view of its bind requests (sum and count of their durations)."""
    out: dict[str, float] = {}
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r,
    ):
        for name, _labels, value in samples(r.read().decode()):
            if name.startswith("hyperplace_scheduler_bind_request_duration_seconds_"):
                out[name.rsplit("_", 1)[1]] = value
    return out


def mean_ms(stats: dict[str, float], before: dict[str, float], prefix: str) -> str:
    """The mean of ``prefix``'s observations between ``before`` and ``stats``, in ms."""
    s = stats.get(f"{prefix}sum", 0.0) - before.get(f"{prefix}sum", 0.0)
    n = stats.get(f"{prefix}count", 0.0) - before.get(f"{prefix}count", 0.0)
    return f"{1000 * s / n:.1f} ms (n={n:.0f})" if n else "-"
