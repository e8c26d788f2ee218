"""Objects the tests (and local-up) hand to kubectl keep their strings: a random tag such as
``80e156`` is a number to kubectl's YAML reader unless it is quoted."""

from __future__ import annotations

import pytest

from .kube import Kubectl

pytestmark = pytest.mark.apiserver


def test_a_label_that_reads_as_a_number_stays_a_string(kubectl: Kubectl, namespace: str) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tagged", "namespace": namespace, "labels": {"tag": "80e156", "n": "0012"}},
        "data": {"on": "yes"},
    }
    kubectl.create([cm])
    got = kubectl.get("configmaps", "-n", namespace, "tagged")
    assert got["metadata"]["labels"] == {"tag": "80e156", "n": "0012"}
    assert got["data"] == {"on": "yes"}
