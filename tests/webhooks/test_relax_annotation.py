"""A researcher's relax-topology annotation is checked at admission, on Jobs and PodGroups."""

from __future__ import annotations

import copy
from typing import Any

from webhooks.admission import admit
from webhooks.job import validate_job

from .builders import job

FIELD = "metadata.annotations[hyperplace.io/relax-topology]"


def with_relax(obj: dict[str, Any], value: str) -> dict[str, Any]:
    obj.setdefault("metadata", {}).setdefault("annotations", {})["hyperplace.io/relax-topology"] = value
    return obj


def test_a_well_formed_relaxation_is_admitted() -> None:
    out = admit(with_relax(job(network_topology={"mode": "hard", "highestTierAllowed": 3}), "1@10m,2@1h30m"))
    assert out.allowed, out.messages


def test_steps_out_of_order_are_refused_with_the_annotation_named() -> None:
    out = admit(with_relax(job(), "2@30m,1@10m"))
    assert not out.allowed
    assert len(out.messages) == 1 and out.messages[0].startswith(FIELD)
    assert "ascend in tier and time" in out.messages[0]


def test_a_duration_go_cannot_read_is_refused_on_create_and_on_update() -> None:
    bad = with_relax(job(), "1@10 minutes")
    assert any(m.startswith(FIELD) and "Go duration" in m for m in validate_job(bad).messages)
    assert any(m.startswith(FIELD) for m in validate_job(bad, "UPDATE", old=job()).messages)


def test_a_podgroup_with_a_malformed_relaxation_is_refused() -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": 1},
    }
    assert admit(with_relax(copy.deepcopy(pg), "1@10m")).allowed
    out = admit(with_relax(pg, "0@10m"))
    assert not out.allowed and out.messages[0].startswith(FIELD)
