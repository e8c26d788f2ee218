"""A preemptor with a required anti-affinity needs the conflicting pod gone, not just room."""

from __future__ import annotations

from tests.preemption.helpers import PREEMPT_CONF, PRIORITY_CLASSES, pending_gang, running_gang
from tests.scheduler.builders import node, schedule

ANTI = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def test_the_pod_the_preemptor_cannot_stand_is_the_one_evicted():
    # n1 (2 cpu) runs two low-priority pods: "cache", and "web", which the high-priority "web"
    # pod may not share a node with. Evicting either frees the cpu; only evicting the old web
    # pod lets the new one in, and only that pod goes.
    cache_pg, cache = running_gang("cache", ["n1"], cpu=1, created="2026-01-02T00:00:00Z")
    web_pg, web = running_gang("web", ["n1"], cpu=1)
    web[0]["metadata"]["labels"]["app"] = "web"
    new_pg, new = pending_gang("web2", 1, tier=None, cpu=1)
    new[0]["metadata"]["labels"]["app"] = "web"
    new[0]["spec"]["affinity"] = ANTI
    result, _ = schedule(
        [node("n1", cpu=2)],
        cache + web + new,
        podgroups=[cache_pg, web_pg, new_pg],
        priority_classes=PRIORITY_CLASSES,
        config=PREEMPT_CONF,
    )
    assert [e.victim for e in result.evictions] == ["default/web-t0-0"]
