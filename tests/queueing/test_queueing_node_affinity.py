"""Required node affinity (queueing/node_affinity.py): kube-scheduler's matching rules, the
API server's validation at the pod spec's paths, its way into the Workload (and back out of
stored JSON) and into the planner's constraints."""

import json
from pathlib import Path

import pytest
import yaml

from queueing import (
    Node,
    PendingJob,
    PodSet,
    Reason,
    Snapshot,
    Workload,
    adapter_for,
    capabilities,
    parse_job,
    plan,
    workload_from_manifest,
)
from queueing.fit import NodePool
from queueing.node_affinity import Requirement, Term, canonical, matches, terms_from_json
from queueing.snapshot import gang_of
from tests.queueing.kinds_support import Runtimes, errors_of
from tests.queueing.test_queueing_batchjob import KATIB_TRIAL
from tests.queueing.test_queueing_trainjob import TORCH_DISTRIBUTED

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUNTIMES = Runtimes(yaml.safe_load(TORCH_DISTRIBUTED))

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
POD = "spec.template.spec"
TERMS = f"{POD}.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"
LABELS = {"zone": "a", "gen": "4", "pool": "gpu", "odd": "4x"}


def expression(key, operator, *values):
    return Requirement(key, operator, tuple(values))


def term(*expressions, fields=()):
    return Term(tuple(expressions), tuple(fields))


def name_is(operator, name):
    return Requirement("metadata.name", operator, (name,))


# --- matching, as kube-scheduler's NodeAffinity filter -------------------------------------


@pytest.mark.parametrize(
    ("requirement", "matched"),
    [
        (expression("zone", "In", "a", "b"), True),
        (expression("zone", "In", "b"), False),
        (expression("rack", "In", "a"), False),  # an absent label is in no set
        (expression("zone", "NotIn", "b"), True),
        (expression("zone", "NotIn", "a"), False),
        (expression("rack", "NotIn", "a"), True),  # an absent label is outside every set
        (expression("zone", "Exists"), True),
        (expression("rack", "Exists"), False),
        (expression("rack", "DoesNotExist"), True),
        (expression("zone", "DoesNotExist"), False),
        (expression("gen", "Gt", "3"), True),
        (expression("gen", "Gt", "4"), False),
        (expression("gen", "Lt", "5"), True),
        (expression("gen", "Lt", "4"), False),
        (expression("gen", "Gt", "10"), False),  # compared as integers, not as strings
        (expression("gen", "Lt", "10"), True),
        (expression("rack", "Gt", "0"), False),  # absent: no number to compare
        (expression("odd", "Gt", "0"), False),  # a label that is no integer matches neither
        (expression("odd", "Lt", "99"), False),
        (expression("gen", "Gt", "three"), False),  # nor does a value that is none
        (expression("gen", "Gt", "1", "2"), False),
        (expression("gen", "Gt", f"{2**63}"), False),  # beyond int64: ParseInt fails
    ],
)
def test_each_operator_on_a_nodes_labels(requirement, matched):
    assert matches((term(requirement),), LABELS, "node-1") is matched


def test_gt_and_lt_take_a_sign_as_strconv_does():
    assert matches((term(expression("gen", "Gt", "-1")),), {"gen": "+0"}, "n")
    assert not matches((term(expression("gen", "Lt", "-1")),), {"gen": "0"}, "n")
    assert not matches((term(expression("gen", "Gt", "1")),), {"gen": " 2"}, "n")  # no spaces
    assert not matches((term(expression("gen", "Gt", "1")),), {"gen": "1_000"}, "n")  # nor Python's underscores


def test_expressions_of_a_term_are_anded_and_terms_ored():
    both = term(expression("zone", "In", "a"), expression("pool", "In", "cpu"))
    assert not matches((both,), LABELS, "n")
    either = (term(expression("zone", "In", "b")), term(expression("pool", "In", "gpu")))
    assert matches(either, LABELS, "n")
    assert not matches(either[:1], LABELS, "n")


def test_an_empty_term_matches_no_node_and_no_terms_require_nothing():
    assert not matches((Term(),), LABELS, "n")
    assert matches((Term(), term(expression("zone", "Exists"))), LABELS, "n")
    assert matches((), {}, "n")


def test_match_fields_select_the_nodes_name():
    assert matches((term(fields=(name_is("In", "node-1"),)),), {}, "node-1")
    assert not matches((term(fields=(name_is("In", "node-1"),)),), {}, "node-2")
    assert matches((term(fields=(name_is("NotIn", "node-1"),)),), {}, "node-2")
    assert not matches((term(fields=(name_is("NotIn", "node-1"),)),), {}, "node-1")
    # Fields and expressions of one term must all hold.
    both = term(expression("zone", "In", "a"), fields=(name_is("In", "node-1"),))
    assert matches((both,), LABELS, "node-1")
    assert not matches((both,), {"zone": "b"}, "node-1")
    assert not matches((term(fields=(Requirement("metadata.uid", "In", ("node-1",)),)),), {}, "node-1")


def test_node_admits_its_affinity_with_its_selector_taints_and_cordon():
    group = gang_of(workload(node_affinity=(term(expression("zone", "In", "a")),)))[0]
    assert Node("n", {"cpu": 1000}, labels={"zone": "a"}).admits(group)
    assert not Node("n", {"cpu": 1000}, labels={"zone": "b"}).admits(group)
    assert not Node("n", {"cpu": 1000}, labels={"zone": "a"}, unschedulable=True).admits(group)
    by_name = gang_of(workload(node_affinity=(term(fields=(name_is("In", "right"),)),)))[0]
    assert [n for n in ("wrong", "right") if Node(n, {"cpu": 1000}).admits(by_name)] == ["right"]


def test_equal_affinities_make_equal_constraints_whatever_their_order():
    a = (term(expression("zone", "In", "a", "b"), expression("gen", "Exists")), term(expression("pool", "In", "x")))
    b = (
        term(expression("pool", "In", "x")),
        term(expression("gen", "Exists"), expression("zone", "In", "b", "a", "a")),
        term(expression("pool", "In", "x")),
    )
    assert canonical(a) == canonical(b) and hash(canonical(a)) == hash(canonical(b))
    first, second = gang_of(workload(node_affinity=a))[0], gang_of(workload(node_affinity=b))[0]
    assert first.constraints == second.constraints and hash(first.constraints) == hash(second.constraints)
    assert first.constraints != gang_of(workload())[0].constraints


def test_a_pool_gives_affinity_constrained_pods_only_the_nodes_their_affinity_admits():
    nodes = [Node(f"n{i}", {"cpu": 4000, "pods": 10}, labels={"zone": "ab"[i % 2]}) for i in range(4)]
    pool = NodePool(nodes)
    group = gang_of(workload(node_affinity=(term(expression("zone", "In", "b")),)))[0]
    assert [pool.names[n] for n in pool.eligible(group.constraints).nodes] == ["n1", "n3"]
    assert len(pool.eligible(gang_of(workload())[0].constraints).nodes) == 4


def test_a_job_no_node_admits_never_fits_and_says_why():
    nodes = (Node("n1", {"cpu": 8000, "pods": 10}, labels={"zone": "a"}),)
    pinned = workload(node_affinity=(term(expression("zone", "In", "b")),))
    result = plan(Snapshot(0.0, (PendingJob(1, "ns", 0, 0.0, pinned),), nodes=nodes))
    assert result.pending[1].reason is Reason.NEVER_FITS_NODES
    assert "required node affinity" in result.pending[1].message
    anywhere = workload(node_affinity=(term(expression("zone", "In", "a", "b")),))
    assert plan(Snapshot(0.0, (PendingJob(1, "ns", 0, 0.0, anywhere),), nodes=nodes)).admitted == (1,)


def workload(**pod_set):
    return Workload("Job", "batch/v1", "j", "ns", (PodSet("main", 1, {"cpu": 1000}, **pod_set),))


# --- from a manifest, as the API server validates it ----------------------------------------


def trial(affinity):
    manifest = yaml.safe_load(KATIB_TRIAL)
    manifest["spec"]["template"]["spec"]["affinity"] = affinity
    return manifest


def required(*terms):
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}


GPU_TERM = {
    "matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100", "H100"]},
        {"key": "gen", "operator": "Gt", "values": ["3"]},
    ],
    "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-7"]}],
}


GPU = Term(
    (Requirement("nvidia.com/gpu.product", "In", ("A100", "H100")), Requirement("gen", "Gt", ("3",))),
    (Requirement("metadata.name", "NotIn", ("node-7",)),),
)


def test_a_pod_templates_required_terms_become_its_pod_sets():
    preferred = [{"weight": 1, "preference": {"matchExpressions": [{"key": "spot", "operator": "Exists"}]}}]
    affinity = required(GPU_TERM, {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]})
    affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": []}
    (pod_set,) = workload_from_manifest(trial(affinity)).pod_sets
    assert pod_set.node_affinity == (GPU, term(expression("zone", "DoesNotExist")))


@pytest.mark.parametrize(
    "affinity",
    [
        None,
        {},
        {"podAffinity": {}},
        {"nodeAffinity": {}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]}},
    ],
)
def test_without_required_terms_a_pod_requires_nothing(affinity):
    (pod_set,) = workload_from_manifest(trial(affinity)).pod_sets
    assert pod_set.node_affinity == ()


def test_an_empty_term_is_valid_and_kept_it_matches_no_node():
    (pod_set,) = workload_from_manifest(trial(required({}, GPU_TERM))).pod_sets
    assert pod_set.node_affinity[0] == Term()


EXPRESSION = f"{TERMS}[0].matchExpressions[0]"
FIELD = f"{TERMS}[0].matchFields[0]"


def one_expression(**requirement):
    return required({"matchExpressions": [requirement]})


def one_field(**requirement):
    return required({"matchFields": [requirement]})


@pytest.mark.parametrize(
    ("affinity", "path", "message"),
    [
        ("near", f"{POD}.affinity", "must be a mapping, got a string"),
        ({"nodeAffinity": []}, f"{POD}.affinity.nodeAffinity", "must be a mapping, got a list"),
        ({"nodeAffinity": {REQUIRED: {}}}, TERMS, "required: at least one node selector term"),
        (required(), TERMS, "required: at least one node selector term"),
        ({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": {}}}}, TERMS, "must be a list, got a mapping"),
        (required("zone"), f"{TERMS}[0]", "must be a mapping, got a string"),
        (required({"matchExpresions": []}), f"{TERMS}[0].matchExpresions", "unknown field"),
        (one_expression(key="zone", operator="In"), f"{EXPRESSION}.values", "required: at least one value"),
        (one_expression(key="zone", operator="NotIn", values=[]), f"{EXPRESSION}.values", "required"),
        (one_expression(key="zone", operator="Exists", values=["a"]), f"{EXPRESSION}.values", "must be empty"),
        (one_expression(key="zone", operator="DoesNotExist", values=["a"]), f"{EXPRESSION}.values", "must be"),
        (one_expression(key="gen", operator="Gt"), f"{EXPRESSION}.values", "must hold exactly one value"),
        (one_expression(key="gen", operator="Lt", values=["1", "2"]), f"{EXPRESSION}.values", "exactly one"),
        (one_expression(key="zone", operator="Equals", values=["a"]), f"{EXPRESSION}.operator", "must be one of"),
        (one_expression(key="zone", values=["a"]), f"{EXPRESSION}.operator", "required"),
        (one_expression(operator="Exists"), f"{EXPRESSION}.key", "required"),
        (one_expression(key="bad key!", operator="Exists"), f"{EXPRESSION}.key", "must be a label key"),
        (one_expression(key="zone", operator="In", values=["a b"]), f"{EXPRESSION}.values[0]", "must be empty or"),
        (one_expression(key="zone", operator="In", values=[3]), f"{EXPRESSION}.values[0]", "must be a string"),
        (one_expression(key="zone", operator="In", values="a"), f"{EXPRESSION}.values", "must be a list"),
        (one_expression(key="zone", operator="In", values=["a"], value="a"), f"{EXPRESSION}.value", "unknown"),
        (required({"matchExpressions": ["zone"]}), EXPRESSION, "must be a mapping, got a string"),
        (one_field(key="metadata.uid", operator="In", values=["n"]), f"{FIELD}.key", "not a valid field selector"),
        (one_field(key="metadata.name", operator="Exists"), f"{FIELD}.operator", "must be one of In, NotIn"),
        (one_field(key="metadata.name", operator="In", values=["a", "b"]), f"{FIELD}.values", "exactly one"),
        (one_field(key="metadata.name", operator="NotIn"), f"{FIELD}.values", "exactly one"),
        (one_field(key="metadata.name", operator="In", values=["Node_1"]), f"{FIELD}.values[0]", "node name"),
    ],
)
def test_invalid_required_affinity_is_refused_at_its_path(affinity, path, message):
    errors = errors_of(trial(affinity))
    assert list(errors) == [path]
    assert message in errors[path]


def test_every_problem_is_reported_at_once():
    affinity = required(
        {"matchExpressions": [{"key": "zone", "operator": "In"}, {"key": "gen", "operator": "Gt", "values": []}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": []}]},
    )
    assert set(errors_of(trial(affinity))) == {
        f"{TERMS}[0].matchExpressions[0].values",
        f"{TERMS}[0].matchExpressions[1].values",
        f"{TERMS}[1].matchFields[0].values",
    }


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_affinity_is_read_from_every_kinds_pod_templates(path):
    manifest, workload = parse_job(path.read_text(), runtimes=RUNTIMES)
    adapter = adapter_for(manifest["apiVersion"], manifest["kind"])
    # A TrainJob's templates are its override entries: one is added for each job it lacks.
    templates = capabilities.pod_templates(adapter, manifest, [p.role for p in workload.pod_sets])
    for _, template in templates:
        capabilities.template_pod_spec(adapter, template)["affinity"] = required(GPU_TERM)
    workload = adapter.validate_and_build(manifest, RUNTIMES)
    assert templates and [p.node_affinity for p in workload.pod_sets] == [(GPU,)] * len(workload.pod_sets)


def test_an_elastic_pytorchjobs_workers_keep_their_affinity():
    manifest, _ = parse_job((EXAMPLES / "pytorch-ddp.yaml").read_text())
    manifest["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"] = required(GPU_TERM)
    worker = workload_from_manifest(manifest).pod_sets[-1]
    replicas = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    assert (worker.role, worker.count, worker.minimum, worker.node_affinity) == ("Worker", replicas, 1, (GPU,))


# --- stored as JSON and read back ----------------------------------------------------------


def test_a_workload_with_affinity_round_trips_through_json():
    original = workload_from_manifest(trial(required(GPU_TERM, {})))
    stored = json.loads(json.dumps(original.to_json()))
    assert stored["pod_sets"][0]["node_affinity"] == [GPU_TERM, {}]
    assert Workload.from_json(stored) == original


def test_a_workload_stored_before_affinity_existed_still_loads():
    stored = workload_from_manifest(yaml.safe_load(KATIB_TRIAL)).to_json()
    assert "node_affinity" not in stored["pod_sets"][0]  # unchanged for every job without one
    assert Workload.from_json(stored).pod_sets[0].node_affinity == ()
    assert terms_from_json(None) == ()
