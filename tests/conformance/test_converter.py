"""The converter of Volcano's Go test tables: its reading of Go, and that the committed cases
are what it makes of the Volcano snapshot (when the snapshot is on this machine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conformance.cases import (
    CASES_DIR,
    TABLELESS,
    VOLCANO_REF,
    VOLCANO_REPO,
    convert_all,
    git_source,
    render_cases,
)
from tests.conformance.golit import Call, Composite, Ident, Lit, parse_functions, tokenize
from tests.conformance.volcano_go import Evaluator, GoSource, convert_file

TABLE = """package preempt

import (
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/util"
)

var low = util.BuildPriorityClass("low", 10) // a file-level var

func TestPreempt(t *testing.T) {
	trueValue := true
	tests := []uthelper.TestCommonStruct{
		{
			Name: `raw "name"`,
			Pods: []*v1.Pod{
				util.BuildPod("c1", "p1", "n1", v1.PodRunning, api.BuildResourceList("1", "1G"), "pg1", map[string]string{}, nil),
			},
			Nodes: []*v1.Node{
				util.BuildNode("n1", api.BuildResourceList("2", "2G", []api.ScalarResource{{Name: "pods", Value: "10"}}...), nil),
			},
			PodGroups: []*schedulingv1beta1.PodGroup{
				util.BuildPodGroup("pg1", "c1", "q1", 1, nil, schedulingv1beta1.PodGroupRunning),
			},
			Queues:         []*schedulingv1beta1.Queue{util.BuildQueue("q1", 1, nil)},
			ExpectEvictNum: 0,
		},
	}
	tiers := []conf.Tier{{Plugins: []conf.PluginOption{{Name: "gang", EnabledJobStarving: &trueValue}}}}
	for i, test := range tests {
		test.PriClass = []*schedulingv1.PriorityClass{low}
		t.Run(test.Name, func(t *testing.T) {
			test.RegisterSession(tiers, nil)
			test.Run([]framework.Action{New()})
		})
	}
}
"""


def test_go_lines_end_where_go_inserts_semicolons():
    kinds = [(t.kind, t.text) for t in tokenize("x := f(1,\n2)\ny := `a\nb` // c\n")]
    assert kinds == [
        ("ident", "x"), ("op", ":="), ("ident", "f"), ("op", "("), ("int", "1"), ("op", ","),
        ("int", "2"), ("op", ")"), (";", ";"), ("ident", "y"), ("op", ":="), ("string", "`a\nb`"), (";", ";"),
    ]  # fmt: skip


def test_composite_literals_and_calls_are_read_as_written():
    (top, fn) = parse_functions('package p\nfunc T() {\n\tx := pkg.F("a", []int{1, 2}, m{"k": 3})\n}\n')
    assert fn.name == "T" and top.name == ""
    (st,) = fn.body
    assert st.names == ("x",)
    call = st.value
    assert isinstance(call, Call) and call.func == Ident("pkg.F") and call.args[0] == Lit("a")
    slice_lit, map_lit = call.args[1], call.args[2]
    assert isinstance(slice_lit, Composite) and [v for _, v in slice_lit.elements] == [Lit(1), Lit(2)]
    assert isinstance(map_lit, Composite) and map_lit.elements == ((Lit("k"), Lit(3)),)


def test_a_table_entry_becomes_a_case_with_the_session_volcano_runs():
    files = {"pkg/scheduler/actions/preempt/preempt_test.go": TABLE}
    source = GoSource(files.__getitem__, lambda _: [])
    (case,) = convert_file(source, "pkg/scheduler/actions/preempt/preempt_test.go")
    assert case.reason == "" and case.name == 'raw "name"'
    data = case.data
    assert data["actions"] == ["preempt"]
    # Only the switches the Go test sets are on (the rest are off in a Go test).
    assert data["conf"]["tiers"] == [{"plugins": [{"name": "gang", "enabled": ["enableJobStarving"]}]}]
    assert data["objects"]["priorityclasses"][0]["value"] == 10  # from the loop's assignment
    (node,) = data["objects"]["nodes"]
    assert node["status"]["allocatable"] == {"cpu": "2", "memory": "2G", "pods": "10"}
    (pod,) = data["objects"]["pods"]
    assert (
        pod["spec"]["nodeName"] == "n1"
        and pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pg1"
    )
    assert data["expect"]["evict_num"] == 0


def test_a_label_set_on_a_node_after_it_is_built_reaches_the_case():
    # Volcano's predicates tests give nodes their hostname so: n1.Labels["..."] = "node1".
    text = TABLE.replace(
        "\ttests := []uthelper.TestCommonStruct{",
        '\tn1 := util.BuildNode("n1", api.BuildResourceList("2", "2G"), map[string]string{})\n'
        '\tn1.Labels["kubernetes.io/hostname"] = "node1"\n'
        "\ttests := []uthelper.TestCommonStruct{",
    ).replace(
        'util.BuildNode("n1", api.BuildResourceList("2", "2G", []api.ScalarResource{{Name: "pods", Value: "10"}}...), nil)',
        "n1",
    )
    source = GoSource({"pkg/scheduler/actions/preempt/preempt_test.go": text}.__getitem__, lambda _: [])
    (case,) = convert_file(source, "pkg/scheduler/actions/preempt/preempt_test.go")
    assert case.reason == ""
    (node,) = case.data["objects"]["nodes"]
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "node1"}


SCORES = """package binpack

import (
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/util"
)

const (
	eps = 1e-8
)

func addResource(resourceList v1.ResourceList, name v1.ResourceName, need string) {
	resourceList[name] = resource.MustParse(need)
}

func TestNode(t *testing.T) {
	p1 := util.BuildPod("c1", "p1", "", v1.PodPending, api.BuildResourceList("1", "1Gi"), "pg1", nil, nil)
	addResource(p1.Spec.Containers[0].Resources.Requests, "nvidia.com/gpu", "2")
	tests := []struct {
		uthelper.TestCommonStruct
		arguments framework.Arguments
		expected  map[string]map[string]float64
	}{
		{
			TestCommonStruct: uthelper.TestCommonStruct{
				Name:  "one pod",
				Pods:  []*v1.Pod{p1},
				Nodes: []*v1.Node{util.BuildNode("n1", api.BuildResourceList("2", "4Gi"), nil)},
			},
			arguments: framework.Arguments{"binpack.weight": 10},
			expected:  map[string]map[string]float64{"c1/p1": {"n1": 0}},
		},
	}
	trueValue := true
	for i, test := range tests {
		tiers := []conf.Tier{{Plugins: []conf.PluginOption{{Name: PluginName, EnabledNodeOrder: &trueValue, Arguments: test.arguments}}}}
		ssn := test.RegisterSession(tiers, nil)
		for _, job := range ssn.Jobs {
			for _, task := range job.Tasks {
				for _, node := range ssn.Nodes {
					score, err := ssn.NodeOrderFn(task, node)
				}
			}
		}
	}
}
"""


def test_a_plugin_test_that_asks_node_scores_becomes_a_case_of_expected_scores():
    source = GoSource(
        {"pkg/scheduler/plugins/binpack/binpack_test.go": SCORES}.__getitem__, lambda _: ["binpack_test.go"]
    )
    (case,) = convert_file(source, "pkg/scheduler/plugins/binpack/binpack_test.go")
    assert case.reason == ""
    # No action runs: the session is opened and its plugins asked. The loop compares with ==
    # (it does not use the file's eps), so the score must be exact.
    assert case.data["actions"] == []
    assert case.data["scores"] == {"tolerance": 0, "nodes": {"c1/p1": {"n1": 0.0}}}
    assert case.data["conf"]["tiers"][0]["plugins"][0]["arguments"] == {"binpack.weight": 10}
    # The helper's change to the pod, made before the table, is in the case.
    (pod,) = case.data["objects"]["pods"]
    assert pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2"


WEIGHTED = """package nodeorder

import (
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/util"
	"volcano.sh/volcano/pkg/scheduler/actions/allocate"
)

type weighted struct {
	uthelper.TestCommonStruct
	Most  int
	Least int
}

func TestWeights(t *testing.T) {
	tests := []weighted{
		{
			TestCommonStruct: uthelper.TestCommonStruct{
				Name:  "most",
				Nodes: []*v1.Node{util.BuildNode("n1", api.BuildResourceList("2", "2G"), nil)},
			},
			Most: 1,
		},
	}
	for _, test := range tests {
		tiers := []conf.Tier{{Plugins: []conf.PluginOption{{Name: "nodeorder", Arguments: framework.Arguments{"most": test.Most, "least": test.Least}}}}}
		test.RegisterSession(tiers, nil)
		test.Run([]framework.Action{allocate.New()})
	}
}
"""


def test_an_int_field_the_table_leaves_out_is_zero_not_the_plugins_default():
    # nodeorder's table sets one strategy weight per entry; Go gives the others 0, which turns
    # them off (were it absent, our nodeorder would take its default weight).
    path = "pkg/scheduler/plugins/nodeorder/nodeorder_test.go"
    (case,) = convert_file(GoSource({path: WEIGHTED}.__getitem__, lambda _: []), path)
    assert case.reason == "", case.reason
    (plugin,) = case.data["conf"]["tiers"][0]["plugins"]
    assert plugin["arguments"] == {"most": 1, "least": 0}


def test_an_unknown_helper_makes_the_case_not_convertible_with_the_reason():
    text = TABLE.replace('util.BuildQueue("q1", 1, nil)', 'util.BuildSomethingNew("q1")')
    source = GoSource({"pkg/scheduler/actions/preempt/preempt_test.go": text}.__getitem__, lambda _: [])
    (case,) = convert_file(source, "pkg/scheduler/actions/preempt/preempt_test.go")
    assert "util.BuildSomethingNew" in case.reason


def test_the_evaluator_knows_the_action_a_bare_new_builds():
    source = GoSource(
        {"pkg/scheduler/actions/reclaim/x_test.go": "package reclaim\n"}.__getitem__, lambda _: []
    )
    ev = Evaluator(source, "pkg/scheduler/actions/reclaim/x_test.go")
    assert ev.eval(Call(Ident("New"), ()), {}).name == "reclaim"


@pytest.mark.skipif(
    not Path(os.environ.get("HYPERPLACE_VOLCANO_REPO", VOLCANO_REPO)).exists(),
    reason="no Volcano snapshot on this machine (HYPERPLACE_VOLCANO_REPO)",
)
def test_the_committed_cases_are_what_the_converter_makes_of_volcano():
    source, commit = git_source(os.environ.get("HYPERPLACE_VOLCANO_REPO", VOLCANO_REPO), VOLCANO_REF)
    tableless: dict[str, list[str]] = {}
    made = render_cases(convert_all(source, tableless), ref=VOLCANO_REF, commit=commit, tableless=tableless)
    on_disk = {p.relative_to(CASES_DIR): p.read_text() for p in (*CASES_DIR.glob("*/*.yaml"), TABLELESS)}
    assert sorted(made) == sorted(on_disk), "run: python hack/volcano-conformance.py"
    assert [p for p in made if made[p] != on_disk[p]] == [], "run: python hack/volcano-conformance.py"
