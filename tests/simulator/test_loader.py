"""Input loading: multi-document YAML with file and line, defaults, duplicates, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.loader import InputError, deterministic_uid, load_paths

from .conftest import nodes_yaml


def test_documents_keep_file_and_line_and_defaults(write):
    f = write(
        "in.yaml",
        """
        # a comment first
        apiVersion: v1
        kind: Node
        metadata: {name: n0}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p0}
        spec: {nodeName: n0, containers: [{name: c, image: x}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p1, namespace: team, uid: given-uid}
        spec: {containers: [{name: c, image: x}]}
        """,
    )
    inputs = load_paths([f])
    by = {o.name: o for o in inputs.objects}
    # The default Queue is added (built in) since the input has none.
    assert by["default"].kind == "Queue"
    assert by["default"].source.file == "<built-in>"
    assert by["n0"].source.line == 2 and by["n0"].source.file == str(f)
    assert by["p0"].source.line == 6
    assert by["p1"].source.line == 11
    # A Node without conditions is Ready.
    assert by["n0"].obj["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    # A bound Pod runs; an unbound one is pending. Namespaced kinds default to "default".
    assert by["p0"].obj["status"]["phase"] == "Running"
    assert by["p0"].namespace == "default"
    assert by["p1"].obj["status"]["phase"] == "Pending"
    # uid kept when given, else deterministic.
    assert by["p1"].obj["metadata"]["uid"] == "given-uid"
    assert by["p0"].obj["metadata"]["uid"] == deterministic_uid("Pod", "default", "p0")
    assert load_paths([f]).objects[2].obj == by["p0"].obj


def test_explicit_pod_phase_and_default_queue_kept(write):
    f = write(
        "in.yaml",
        """
        apiVersion: scheduling.volcano.sh/v1beta1
        kind: Queue
        metadata: {name: default}
        spec: {weight: 7}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: done}
        spec: {nodeName: n0, containers: []}
        status: {phase: Succeeded}
        """,
    )
    inputs = load_paths([f])
    queues = inputs.of_kind("Queue")
    assert len(queues) == 1 and queues[0].obj["spec"]["weight"] == 7
    assert inputs.of_kind("Pod")[0].obj["status"]["phase"] == "Succeeded"


def test_directories_are_recursive_in_name_order(tmp_path: Path, write):
    write("b/z.yaml", nodes_yaml(["z"]))
    write("a.yml", nodes_yaml(["a"]))
    write("b/c/m.yaml", nodes_yaml(["m"]))
    write("notes.txt", "not yaml: [")
    write(".github/workflows/ci.yaml", "on: [push\n")
    inputs = load_paths([tmp_path])
    assert [o.name for o in inputs.objects if o.kind == "Node"] == ["a", "m", "z"]


def test_malformed_yaml_names_file_and_line(write):
    f = write("bad.yaml", nodes_yaml(["n0"]) + "---\nkind: Node\nmetadata: {name: [unclosed\n")
    with pytest.raises(InputError) as err:
        load_paths([f])
    assert str(err.value).startswith(f"{f}:")
    line = int(str(err.value).split(":")[1])
    assert line >= 9  # the second document starts at line 8; the error is inside it


def test_duplicate_object_names_both_places(write):
    a = write("a.yaml", nodes_yaml(["n0"]))
    b = write("b.yaml", "# x\n" + nodes_yaml(["n0"]))
    with pytest.raises(InputError) as err:
        load_paths([a, b])
    msg = str(err.value)
    assert "Node n0 is defined twice" in msg
    # write() strips leading blank lines; in b.yaml a comment and a blank line come first.
    assert msg.startswith(f"{b}:3: ")
    assert msg.endswith(f"here and at {a}:1")


def test_same_name_in_other_namespace_is_not_a_duplicate(write):
    f = write(
        "pods.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: a}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: b}
        """,
    )
    assert len(load_paths([f]).of_kind("Pod")) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- just\n- a list\n", "expected a Kubernetes object"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "object has no kind"),
        ("apiVersion: v1\nkind: Node\nmetadata: {}\n", "Node has no metadata.name"),
    ],
)
def test_objects_without_identity_are_errors(write, text, expected):
    f = write("x.yaml", text)
    with pytest.raises(InputError, match=expected):
        load_paths([f])


def test_missing_path_is_an_error(tmp_path: Path):
    with pytest.raises(InputError, match="no such file or directory"):
        load_paths([tmp_path / "nope.yaml"])


def test_unsupported_kinds_warn_and_lists_expand(write):
    f = write(
        "x.yaml",
        """
        apiVersion: v1
        kind: List
        items:
        - {apiVersion: v1, kind: Node, metadata: {name: n1}}
        - {apiVersion: apps/v1, kind: Deployment, metadata: {name: d}}
        """,
    )
    inputs = load_paths([f])
    assert [o.name for o in inputs.of_kind("Node")] == ["n1"]
    assert any("apps/v1 Deployment is not simulated" in w for w in inputs.warnings)


def test_scheduler_conf_file_in_directory(tmp_path: Path, write):
    write("cluster.yaml", nodes_yaml(["n0"]))
    write("volcano-scheduler.conf", 'actions: "allocate"\n')
    inputs = load_paths([tmp_path])
    assert inputs.scheduler_conf == 'actions: "allocate"\n'
    assert inputs.scheduler_conf_source == str(tmp_path / "volcano-scheduler.conf")
