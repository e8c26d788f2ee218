"""The generated CRDs: in sync with the models, structural, Volcano-shaped, and accepting exactly
what the design documents' examples say a HyperNode/Job/PodGroup looks like."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from hyperplace.api import HyperNode, Job, PodGroup, Queue

from .kube_schema import CEL_RULES, CRD_DIR, CRD_FILES, crd, errors, load_gen_crds, openapi

gen = load_gen_crds()

# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------


def test_committed_crds_match_the_models() -> None:
    diffs = gen.check(CRD_DIR)
    assert diffs == [], "manifests/crds drifted from hyperplace/api; run python hack/gen_crds.py\n" + "".join(
        diffs
    )


def test_exactly_the_generated_files_are_committed() -> None:
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(gen.rendered_files())


def test_check_mode_fails_with_a_diff_on_drift(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert gen.main(["--out-dir", str(tmp_path)]) == 0
    assert gen.main(["--check", "--out-dir", str(tmp_path)]) == 0
    target = tmp_path / CRD_FILES["HyperNode"]
    target.write_text(target.read_text().replace("minItems: 1", "minItems: 2"))
    capsys.readouterr()
    assert gen.main(["--check", "--out-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "-                  minItems: 2" in out and "+                  minItems: 1" in out
    (tmp_path / CRD_FILES["Queue"]).unlink()
    assert gen.main(["--check", "--out-dir", str(tmp_path)]) == 1


def test_generation_is_deterministic() -> None:
    assert gen.rendered_files() == gen.rendered_files()


# --------------------------------------------------------------------------------------------
# Structural schema
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_schema_is_structural(kind: str) -> None:
    assert gen.structural_problems(openapi(kind)) == []
    text = (CRD_DIR / CRD_FILES[kind]).read_text()
    for word in ("$ref", "$defs", "title:", "nullable", "default: null"):
        assert word not in text


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}, "forbidden keyword $ref"),
        ({"type": "object", "properties": {"a": {"minimum": 0}}}, ".a: no type"),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
            "anyOf outside the int-or-string pattern",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "object", "properties": {}, "additionalProperties": {}}},
            },
            "properties and additionalProperties together",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "object", "additionalProperties": True}}},
            "not a bool",
        ),
        ({"type": "object", "properties": {"metadata": {"type": "object", "properties": {}}}}, ".metadata"),
        ({"type": "object", "properties": {"a": {"type": "string", "nullable": True}}}, "nullable"),
        ({"type": "object", "properties": {"a": {"type": "integer", "exclusiveMinimum": 0}}}, "boolean"),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "array without items"),
        ({"type": "object", "properties": {"a": {"type": "string", "default": 3}}}, "default 3"),
        (
            {"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": True, "type": "string"}}},
            "must not set type",
        ),
        ({"type": "string"}, "<root>: must be type object"),
    ],
)
def test_structural_checker_catches(schema: dict[str, Any], problem: str) -> None:
    problems = gen.structural_problems(schema)
    assert any(problem in p for p in problems), problems


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every schema node with its path, in the generator's own path notation."""
    out = [(path, node)]
    for sub_path, sub in gen._children(node, path):
        out += _walk(sub, sub_path)
    return out


def test_preserve_unknown_fields_only_on_free_form_maps() -> None:
    """Pinned, so a model change that loosens a typed field into dict[str, Any] is a visible diff."""
    found = {
        (kind, path)
        for kind in CRD_FILES
        for path, node in _walk(openapi(kind))
        if node.get("x-kubernetes-preserve-unknown-fields")
    }
    assert found == {
        ("Job", ".spec.tasks[].template"),
        ("Job", ".spec.tasks[].dependsOn"),
        ("Job", ".spec.volumes[]"),
        ("Job", ".status.conditions[]"),
    }


def test_quantities_are_int_or_string() -> None:
    quantity_paths = {
        (kind, path)
        for kind in CRD_FILES
        for path, node in _walk(openapi(kind))
        if node.get("x-kubernetes-int-or-string")
    }
    assert quantity_paths == {
        ("PodGroup", ".spec.minResources.*"),
        ("Queue", ".spec.capability.*"),
        ("Queue", ".spec.deserved.*"),
        ("Queue", ".spec.guarantee.*.*"),
        ("Queue", ".spec.extendClusters[].capacity.*"),
        ("Queue", ".status.allocated.*"),
        ("Queue", ".status.reservation.resource.*"),
    }
    node = openapi("PodGroup")["properties"]["spec"]["properties"]["minResources"]["additionalProperties"]
    assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert node["pattern"] == gen.QUANTITY_PATTERN


def test_defaults_enums_and_bounds_survive() -> None:
    job = openapi("Job")["properties"]["spec"]["properties"]
    task = job["tasks"]["items"]["properties"]
    partition = task["partitionPolicy"]["properties"]
    for topo in (job["networkTopology"], partition["networkTopology"]):
        mode = topo["properties"]["mode"]
        assert (mode["type"], mode["enum"], mode["default"]) == ("string", ["hard", "soft"], "hard")
        assert topo["properties"]["highestTierAllowed"] == {"type": "integer", "minimum": 0}
        assert topo["properties"]["highestTierName"] == {"type": "string", "maxLength": 253}
    assert partition["minPartitions"] == {"type": "integer", "minimum": 0, "default": 0}
    assert partition["totalPartitions"]["minimum"] == partition["partitionSize"]["minimum"] == 1
    assert task["partitionPolicy"]["required"] == ["partitionSize", "totalPartitions"]
    pg = openapi("PodGroup")["properties"]
    assert pg["spec"]["properties"]["networkTopology"]["properties"]["mode"]["default"] == "hard"
    assert pg["status"]["properties"]["phase"]["enum"] == [
        "Pending",
        "Running",
        "Unknown",
        "Inqueue",
        "Completed",
    ]
    hn = openapi("HyperNode")["properties"]["spec"]
    selector = hn["properties"]["members"]["items"]["properties"]["selector"]
    assert [r["rule"] for r in selector["x-kubernetes-validations"]] == list(CEL_RULES)
    assert selector["properties"]["exactMatch"]["properties"]["name"]["maxLength"] == 253


# --------------------------------------------------------------------------------------------
# CRD identity: what kubectl shows
# --------------------------------------------------------------------------------------------

COLUMNS = {
    "HyperNode": [
        ("Tier", "string", ".spec.tier"),
        ("TierName", "string", ".spec.tierName"),
        ("NodeCount", "integer", ".status.nodeCount"),
        ("READY", "string", '.status.conditions[?(@.type=="Ready")].status'),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    "Job": [
        ("STATUS", "string", ".status.state.phase"),
        ("minAvailable", "integer", ".status.minAvailable"),
        ("RUNNINGS", "integer", ".status.running"),
        ("AGE", "date", ".metadata.creationTimestamp"),
        ("QUEUE", "string", ".spec.queue"),
    ],
    "PodGroup": [
        ("STATUS", "string", ".status.phase"),
        ("minMember", "integer", ".spec.minMember"),
        ("RUNNINGS", "integer", ".status.running"),
        ("AGE", "date", ".metadata.creationTimestamp"),
        ("QUEUE", "string", ".spec.queue"),
    ],
    "Queue": [("PARENT", "string", ".spec.parent")],
    "Command": [],
}
IDENTITY = {
    "HyperNode": ("hypernodes.topology.volcano.sh", "Cluster", ["hn"], "v1alpha1"),
    "Job": ("jobs.batch.volcano.sh", "Namespaced", ["vcjob", "vj"], "v1alpha1"),
    "PodGroup": ("podgroups.scheduling.volcano.sh", "Namespaced", ["pg", "podgroup-v1beta1"], "v1beta1"),
    "Queue": ("queues.scheduling.volcano.sh", "Cluster", ["q"], "v1beta1"),
    # No short name, as in Volcano (vcctl names no Command kind on the command line).
    "Command": ("commands.bus.volcano.sh", "Namespaced", None, "v1alpha1"),
}


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_crd_identity(kind: str) -> None:
    doc = crd(kind)
    name, scope, short, version = IDENTITY[kind]
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["kind"] == "CustomResourceDefinition"
    assert doc["metadata"]["name"] == name
    spec = doc["spec"]
    assert spec["group"] == name.split(".", 1)[1]
    assert spec["scope"] == scope
    assert spec["names"]["kind"] == kind
    assert spec["names"]["plural"] == name.split(".", 1)[0]
    assert spec["names"].get("shortNames") == short
    [ver] = spec["versions"]
    assert (ver["name"], ver["served"], ver["storage"]) == (version, True, True)
    # Volcano's PodGroup CRD has no status subresource, and ours matches it (writers detect it);
    # a Command has no status at all.
    assert ver["subresources"] == ({} if kind in ("PodGroup", "Command") else {"status": {}})
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in ver.get("additionalPrinterColumns", [])]
    assert columns == COLUMNS[kind]
    assert ver["schema"]["openAPIV3Schema"]["properties"]["metadata"] == {"type": "object"}


# --------------------------------------------------------------------------------------------
# Design-document examples
# --------------------------------------------------------------------------------------------

POD_TEMPLATE = """
      template:
        spec:
          containers:
            - name: c0
              image: nginx:latest
              resources:
                requests:
                  cpu: "4"
                limits:
                  cpu: "4"
"""

# The design's "Job management" example (also the user guide's partitioned Job).
JOB_000 = (
    """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: network-topology-job
  namespace: default
spec:
  schedulerName: volcano
  minAvailable: 4
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  tasks:
    - name: t0
      replicas: 8
      partitionPolicy:
        totalPartitions: 2
        partitionSize: 4
        networkTopology:
          mode: hard
          highestTierAllowed: 1
"""
    + POD_TEMPLATE
)

# 000 "Volcano Job Controller": two partitioned tasks whose templates are only a comment (null).
JOB_000_CONTROLLER = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: network-topology-job
spec:
  schedulerName: volcano
  minAvailable: 3
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  tasks:
    - name: "task0"
      replicas: 6
      partitionPolicy:
        totalPartitions: 2
        partitionSize: 3
        networkTopology:
          mode: hard
          highestTierAllowed: 1
      template:
        # pod template
    - name: "task1"
      replicas: 8
      partitionPolicy:
        totalPartitions: 4
        partitionSize: 2
        networkTopology:
          mode: hard
          highestTierAllowed: 1
      template:
        # pod template
"""

# The user guide's partition-policy fragment, wrapped in a Job. Note the document's typo `replica:`.
JOB_002_2_4 = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: subgroup-affinity
spec:
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  tasks:
    - name: "task1"
      replica: 8
      partitionPolicy:
        totalPartitions: 2
        partitionSize: 4
        networkTopology:
          mode: hard
          highestTierAllowed: 1
      template:
      # pod template
"""

JOB_002_3_3_1 = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
 name: network-topology-job
 namespace: default
spec:
 schedulerName: volcano
 minAvailable: 4
 networkTopology:
   mode: hard
   highestTierAllowed: 1
 tasks:
   - name: t0
     replicas: 8
""" + POD_TEMPLATE.replace("\n      ", "\n     ")

JOB_002_3_3_3 = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
 name: network-topology-job
 namespace: default
spec:
 schedulerName: volcano
 minAvailable: 2
 tasks:
   - name: t0
     replicas: 2
""" + POD_TEMPLATE.replace("\n      ", "\n     ")


def _hn(name: str, tier: int, member_type: str, *members: str) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


# 000 Example 1 (spine-leaf, 8 nodes) in wire form: `version:`/`name:` at the top level and bare
# member names in the document are the pre-API sketch; the CRD form is metadata + selector.
HYPERNODES_000_EXAMPLE_1 = [
    _hn("s0", 1, "Node", "node0", "node1"),
    _hn("s1", 1, "Node", "node2", "node3"),
    _hn("s2", 1, "Node", "node4", "node5"),
    _hn("s3", 1, "Node", "node6", "node7"),
    _hn("s4", 2, "HyperNode", "s0", "s1"),
    _hn("s5", 2, "HyperNode", "s2", "s3"),
    _hn("s6", 3, "HyperNode", "s4", "s5"),
]
# 000 Example 2 (two RoCE networks over four NVLink domains). The document spells the children
# both nvlink-network0 and nvlink_network-0; `_` is not allowed in an object name, so the wire
# form uses the spelling the parents reference.
HYPERNODES_000_EXAMPLE_2 = [
    _hn("roce-network0", 2, "HyperNode", "nvlink-network0", "nvlink-network1"),
    _hn("roce-network1", 2, "HyperNode", "nvlink-network2", "nvlink-network3"),
    _hn("nvlink-network0", 1, "Node", "node1", "node2"),
    _hn("nvlink-network1", 1, "Node", "node3", "node4"),
    _hn("nvlink-network2", 1, "Node", "node5", "node6"),
    _hn("nvlink-network3", 1, "Node", "node7", "node8"),
]
# The three selector forms from MemberSelector's Go doc comment in 000.
HYPERNODE_SELECTOR_FORMS = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "rack1"},
    "spec": {
        "tier": 1,
        "tierName": "rack",
        "members": [
            {"type": "Node", "selector": {"exactMatch": {"name": "node1"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[0-9]+$"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"topology-rack": "rack1"}}}},
        ],
    },
    "status": {"nodeCount": 3, "conditions": [{"type": "Ready", "status": "True", "reason": "Resolved"}]},
}

# 000's PodGroup the Job controller should create.
PODGROUP_000 = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: network-topology-job-0f5a
spec:
  minMember: 3
  minResources:
    cpu: "12"
    memory: 8Gi
    nvidia.com/gpu: 8
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  subGroupPolicy:
    - name: "task0"
      subGroupSize: 3
      labelSelector:
        matchLabels:
          volcano.sh/task-spec: task0
      matchLabelKeys:
        - volcano.sh/partition-id
      networkTopology:
        mode: hard
        highestTierAllowed: 1
"""

QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: research
spec:
  weight: 2
  reclaimable: true
  capability: {cpu: 64, memory: 256Gi}
  guarantee: {resource: {cpu: "8"}}
"""

MODELS = {"HyperNode": HyperNode, "Job": Job, "PodGroup": PodGroup, "Queue": Queue}

VALID: list[tuple[str, Any]] = [
    ("000 job", JOB_000),
    ("000 controller job", JOB_000_CONTROLLER),
    ("002 3.3.1 job", JOB_002_3_3_1),
    ("002 3.3.3 job", JOB_002_3_3_3),
    ("000 podgroup", PODGROUP_000),
    ("queue", QUEUE),
    ("selector forms", HYPERNODE_SELECTOR_FORMS),
    *((f"000 example 1 {h['metadata']['name']}", h) for h in HYPERNODES_000_EXAMPLE_1),
    *((f"000 example 2 {h['metadata']['name']}", h) for h in HYPERNODES_000_EXAMPLE_2),
]


def _obj(source: Any) -> dict[str, Any]:
    obj = yaml.safe_load(source) if isinstance(source, str) else copy.deepcopy(source)
    assert isinstance(obj, dict)
    return obj


@pytest.mark.parametrize(("label", "source"), VALID, ids=[v[0] for v in VALID])
def test_design_examples_validate(label: str, source: Any) -> None:
    obj = _obj(source)
    messages, pruned = errors(obj["kind"], obj)
    assert messages == []
    assert pruned == [], "a field of the example is unknown to the CRD and would be dropped"
    # The CRD and the model agree on these: the model (the source of truth) accepts them too.
    MODELS[obj["kind"]].model_validate(obj)


def test_user_guide_typo_is_pruned_like_the_apiserver_would() -> None:
    """The user guide writes `replica: 8`; a kube-apiserver drops the unknown field (kubectl's strict
    field validation refuses it) and the task is left with no replicas."""
    messages, pruned = errors("Job", _obj(JOB_002_2_4))
    assert messages == []
    assert pruned == ["spec.tasks[0].replica"]


def _with(source: Any, path: list[Any], value: Any) -> dict[str, Any]:
    obj = _obj(source)
    node: Any = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


SELECTOR = ["spec", "members", 0, "selector"]
INVALID = [
    (
        "tier -1",
        _with(HYPERNODES_000_EXAMPLE_1[0], ["spec", "tier"], -1),
        "spec.tier: -1 is less than the minimum",
    ),
    (
        "mode medium",
        _with(JOB_000, ["spec", "networkTopology", "mode"], "medium"),
        "spec.networkTopology.mode: 'medium' is not one of ['hard', 'soft']",
    ),
    (
        "partition mode medium",
        _with(JOB_000, ["spec", "tasks", 0, "partitionPolicy", "networkTopology", "mode"], "medium"),
        "is not one of ['hard', 'soft']",
    ),
    (
        "exactMatch Bad_Name",
        _with(HYPERNODES_000_EXAMPLE_1[0], [*SELECTOR, "exactMatch", "name"], "Bad_Name"),
        "spec.members.0.selector.exactMatch.name: 'Bad_Name' does not match",
    ),
    (
        "two selectors",
        _with(
            HYPERNODES_000_EXAMPLE_1[0],
            SELECTOR,
            {"exactMatch": {"name": "node0"}, "regexMatch": {"pattern": "node.*"}},
        ),
        "spec.members.0.selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
    ),
    (
        "no selector",
        _with(HYPERNODES_000_EXAMPLE_1[0], SELECTOR, {}),
        "spec.members.0.selector: Either ExactMatch or RegexMatch or LabelMatch must be specified",
    ),
    (
        "empty exactMatch name",
        _with(HYPERNODES_000_EXAMPLE_1[0], [*SELECTOR, "exactMatch", "name"], ""),
        "exactMatch.name: '' should be non-empty",
    ),
    (
        "empty regex",
        _with(HYPERNODES_000_EXAMPLE_1[0], SELECTOR, {"regexMatch": {"pattern": ""}}),
        "regexMatch.pattern: '' should be non-empty",
    ),
    (
        "no members",
        _with(HYPERNODES_000_EXAMPLE_1[0], ["spec", "members"], []),
        "spec.members: [] should be non-empty",
    ),
    (
        "member type Switch",
        _with(HYPERNODES_000_EXAMPLE_1[0], ["spec", "members", 0, "type"], "Switch"),
        "'Switch' is not one of ['Node', 'HyperNode']",
    ),
    (
        "tier as text",
        _with(HYPERNODES_000_EXAMPLE_1[0], ["spec", "tier"], "1"),
        "spec.tier: '1' is not of type 'integer'",
    ),
    (
        "tierName too long",
        _with(HYPERNODES_000_EXAMPLE_1[0], ["spec", "tierName"], "x" * 254),
        "spec.tierName: ",
    ),
    (
        "negative nodeCount",
        _with(HYPERNODES_000_EXAMPLE_1[0], ["status"], {"nodeCount": -1}),
        "status.nodeCount: -1 is less than the minimum",
    ),
    (
        "totalPartitions 0",
        _with(JOB_000, ["spec", "tasks", 0, "partitionPolicy", "totalPartitions"], 0),
        "partitionPolicy.totalPartitions: 0 is less than the minimum of 1",
    ),
    (
        "partition without size",
        _with(JOB_000, ["spec", "tasks", 0, "partitionPolicy"], {"totalPartitions": 2}),
        "'partitionSize' is a required property",
    ),
    (
        "negative highestTierAllowed",
        _with(JOB_000, ["spec", "networkTopology", "highestTierAllowed"], -1),
        "highestTierAllowed: -1 is less than the minimum of 0",
    ),
    (
        "minResources not a quantity",
        _with(PODGROUP_000, ["spec", "minResources", "cpu"], "4 cores"),
        "spec.minResources.cpu: '4 cores' does not match",
    ),
    (
        "minResources YAML float",
        _with(PODGROUP_000, ["spec", "minResources", "cpu"], 1.5),
        "spec.minResources.cpu: 1.5 is not valid under any of the given schemas",
    ),
    (
        "podgroup phase",
        _with(PODGROUP_000, ["status"], {"phase": "Sleeping"}),
        "status.phase: 'Sleeping' is not one of",
    ),
]


@pytest.mark.parametrize(("label", "obj", "expected"), INVALID, ids=[i[0] for i in INVALID])
def test_invalid_objects_are_refused(label: str, obj: dict[str, Any], expected: str) -> None:
    messages, _ = errors(obj["kind"], obj)
    assert any(expected in m for m in messages), messages


def test_an_unknown_cel_rule_is_not_silently_accepted() -> None:
    from .kube_schema import KubeValidator, UnknownCELRule

    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.size() < 3", "message": "m"}]}
    with pytest.raises(UnknownCELRule):
        list(KubeValidator(schema).iter_errors({}))


def test_generator_maps_shapes_the_current_models_do_not_use_yet() -> None:
    """Constraints a future model field may bring must still come out structural and equivalent."""
    from typing import Literal

    from pydantic import Field

    from hyperplace.api.common import KubeModel, Quantity, TypedObject

    class Inner(KubeModel):
        a: int

    class Spec(KubeModel):
        positive: int = Field(gt=0)
        below: float | None = Field(default=None, lt=1.5)
        only: Literal["x"] = "x"
        maybe_quantity: Quantity | None = None
        int_or_str: int | str | None = None
        loose: Inner | dict[str, Any] | None = None
        tags: list[str] = Field(default_factory=list, max_length=4)

    class Thing(TypedObject):
        spec: Spec

    schema = gen.openapi_schema(Thing)
    assert gen.structural_problems(schema) == []
    props = schema["properties"]["spec"]["properties"]
    assert props["positive"] == {"type": "integer", "minimum": 0, "exclusiveMinimum": True}
    assert props["below"] == {"type": "number", "maximum": 1.5, "exclusiveMaximum": True}
    assert props["only"] == {"type": "string", "enum": ["x"], "default": "x"}
    assert props["maybeQuantity"]["x-kubernetes-int-or-string"] is True
    assert props["maybeQuantity"]["pattern"] == gen.QUANTITY_PATTERN
    assert props["intOrStr"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    assert props["loose"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "maxItems": 4}

    class Bad(KubeModel):
        either: int | list[int]

    class BadThing(TypedObject):
        spec: Bad

    with pytest.raises(gen.SchemaError, match="cannot express union"):
        gen.openapi_schema(BadThing)


@pytest.mark.gobuilt
def test_kube_apiserver_code_agrees(tmp_path: Any) -> None:
    """The same CRDs and examples through k8s.io/apiextensions-apiserver itself (hack/kube-bin.sh
    builds the checker next to kube-apiserver): the CRDs are admitted, and every example gets the
    verdict and pruning the emulation above gives it."""
    import subprocess

    from ..kube_bin import kube_bin_dir

    binary = kube_bin_dir() / "crdcheck"
    cases: list[tuple[dict[str, Any], str, list[str]]] = [(_obj(src), "VALID", []) for _, src in VALID]
    cases.append((_obj(JOB_002_2_4), "VALID", ["spec.tasks[0].replica"]))
    cases += [(copy.deepcopy(obj), "INVALID", []) for _, obj, _ in INVALID]
    for i, (obj, _, _) in enumerate(cases):
        obj["metadata"]["name"] = f"case-{i}"
    objects = tmp_path / "objects.yaml"
    objects.write_text("\n---\n".join(yaml.safe_dump(obj) for obj, _, _ in cases))
    crd_files = [str(CRD_DIR / name) for name in sorted(CRD_FILES.values())]
    out = subprocess.run(
        [str(binary), *crd_files, "--", str(objects)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert sum(line.startswith("OK ") for line in lines) == len(CRD_FILES)
    verdicts = [line.split() for line in lines if line.startswith(("VALID", "INVALID"))]
    assert len(verdicts) == len(cases)
    for (obj, verdict, pruned), got in zip(cases, verdicts, strict=True):
        assert got[:3] == [verdict, obj["kind"], obj["metadata"]["name"]], out.stdout
        assert got[3] == f"pruned=[{' '.join(pruned)}]", out.stdout
