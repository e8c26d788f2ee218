"""Pod requests and resource fit, as kube-scheduler's NodeResourcesFit computes them."""

from __future__ import annotations

import pytest

from hyperplace.kube.requests import ResourceError, pod_requests
from scheduler_plugin.filters.node_resources_fit import insufficient_resources

from .helpers import make_pod

GI = 2**30 * 1000  # one Gi in milli-units


def test_user_guide_pod_asks_for_four_cpus_and_one_pod_slot() -> None:
    pod = make_pod(requests={"cpu": "4"}, limits={"cpu": "4"})
    assert pod_requests(pod) == {"cpu": 4000, "pods": 1000}


def test_pod_without_resources_still_takes_a_pod_slot() -> None:
    assert pod_requests({"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c"}]}}) == {
        "pods": 1000
    }


def test_limits_only_container_requests_its_limits() -> None:
    pod = make_pod(limits={"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 2})
    assert pod_requests(pod) == {"cpu": 500, "memory": GI, "nvidia.com/gpu": 2000, "pods": 1000}


def test_explicit_request_wins_over_limit() -> None:
    pod = make_pod(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"})
    assert pod_requests(pod) == {"cpu": 1000, "memory": GI, "pods": 1000}


def test_containers_add_up() -> None:
    pod = make_pod(requests={"cpu": "1"})
    pod["spec"]["containers"].append(
        {"name": "c1", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}
    )
    assert pod_requests(pod) == {"cpu": 1250, "memory": GI, "pods": 1000}


def test_big_init_container_sets_the_request() -> None:
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"})
    pod["spec"]["initContainers"] = [
        {"name": "i0", "resources": {"requests": {"cpu": "3"}}},
        {"name": "i1", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
    ]
    # Regular init containers run one at a time: the peak of each resource counts.
    assert pod_requests(pod) == {"cpu": 3000, "memory": 4 * GI, "pods": 1000}


def test_sidecar_init_container_adds_to_the_containers() -> None:
    pod = make_pod(requests={"cpu": "1"})
    pod["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
    ]
    assert pod_requests(pod)["cpu"] == 1500


def test_init_container_after_sidecar_runs_next_to_it() -> None:
    pod = make_pod(requests={"cpu": "1"})
    pod["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        {"name": "migrate", "resources": {"requests": {"cpu": "3"}}},
    ]
    # During "migrate" the sidecar is already running: 3 + 1 = 4 > 1 + 1.
    assert pod_requests(pod)["cpu"] == 4000


def test_init_container_before_sidecar_does_not_count_it() -> None:
    pod = make_pod(requests={"cpu": "1"})
    pod["spec"]["initContainers"] = [
        {"name": "migrate", "resources": {"requests": {"cpu": "3"}}},
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
    ]
    assert pod_requests(pod)["cpu"] == 3000


def test_overhead_is_added_on_top() -> None:
    pod = make_pod(requests={"cpu": "1"}, overhead={"cpu": "250m", "memory": "120Mi"})
    assert pod_requests(pod) == {"cpu": 1250, "memory": 120 * 2**20 * 1000, "pods": 1000}


def test_pod_level_requests_replace_the_container_sum_for_cpu_and_memory() -> None:
    pod = make_pod(requests={"cpu": "1", "nvidia.com/gpu": 1}, resources={"requests": {"cpu": "3"}})
    assert pod_requests(pod) == {"cpu": 3000, "nvidia.com/gpu": 1000, "pods": 1000}


def test_invalid_quantity_names_pod_and_field() -> None:
    pod = make_pod("broken", requests={"cpu": "four"})
    with pytest.raises(
        ResourceError, match=r"pod default/broken: spec\.containers\[0\]\.resources\.requests\.cpu"
    ):
        pod_requests(pod)


def test_invalid_init_container_limit_names_the_init_container() -> None:
    pod = make_pod("broken")
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"memory": "1GG"}}}]
    with pytest.raises(ResourceError, match=r"spec\.initContainers\[0\]\.resources\.limits\.memory"):
        pod_requests(pod)


def test_negative_request_is_refused() -> None:
    with pytest.raises(ResourceError, match="greater than or equal to 0"):
        pod_requests(make_pod(requests={"cpu": "-1"}))


def test_fitting_pod_has_no_reasons() -> None:
    assert insufficient_resources({"cpu": 4000, "pods": 1000}, {"cpu": 4000, "pods": 1000}) == []


def test_reasons_name_each_short_resource_in_kube_order() -> None:
    requests = {"nvidia.com/gpu": 1000, "memory": 2, "cpu": 1, "pods": 1000}
    free = {"cpu": 0, "memory": 1, "pods": 0}
    assert insufficient_resources(requests, free) == [
        "Too many pods",
        "Insufficient cpu",
        "Insufficient memory",
        "Insufficient nvidia.com/gpu",
    ]


def test_zero_gpu_request_fits_a_node_without_gpus() -> None:
    assert insufficient_resources({"nvidia.com/gpu": 0, "pods": 1000}, {"pods": 1000}) == []


def test_overcommitted_node_is_insufficient_for_any_positive_request() -> None:
    assert insufficient_resources({"cpu": 1, "pods": 1000}, {"cpu": -500, "pods": 5000}) == [
        "Insufficient cpu"
    ]


def test_invalid_overhead_names_the_field() -> None:
    with pytest.raises(ResourceError, match=r"pod default/p: spec\.overhead\.memory"):
        pod_requests(make_pod(overhead={"memory": "lots"}))
