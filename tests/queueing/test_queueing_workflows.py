"""Workflow graphs and arrays: outcomes, cycles, Slurm's --array, and random DAGs played out."""

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueing import ManifestError
from queueing.workflows import (
    INDEX_MARKER,
    MET,
    NEVER,
    WAIT,
    ArraySpec,
    array_name,
    combined,
    expand,
    find_cycle,
    format_array,
    outcome,
    parse_array,
    ready,
)
from tests.examples import examples

SETTINGS = settings(max_examples=examples(int(os.environ.get("QUEUEING_EXAMPLES", 300))), deadline=None)
STATES = ("Queued", "Released", "Running", "Succeeded", "Failed", "Cancelled")


def satisfied(condition, state):
    """Slurm's afterok / afterany / afternotok, written out apart from the module."""
    return {"ok": ("Succeeded",), "any": ("Succeeded", "Failed", "Cancelled"), "notok": ("Failed", "Cancelled")}[
        condition
    ].count(state) == 1


def field_errors(call):
    with pytest.raises(ManifestError) as caught:
        call()
    return [(error.path, error.message) for error in caught.value.errors]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("ok", (WAIT, WAIT, WAIT, MET, NEVER, NEVER)),
        ("any", (WAIT, WAIT, WAIT, MET, MET, MET)),
        ("notok", (WAIT, WAIT, WAIT, NEVER, MET, MET)),
    ],
)
def test_outcome(condition, expected):
    assert tuple(outcome(condition, state) for state in STATES) == expected


def test_outcome_refuses_an_unknown_condition():
    with pytest.raises(ValueError, match="sometimes"):
        outcome("sometimes", "Succeeded")


def test_combined():
    assert combined([]) == MET
    assert combined([MET, MET]) == MET
    assert combined([MET, WAIT]) == WAIT
    assert combined([WAIT, NEVER, MET]) == NEVER


def test_ready_only_for_nodes_with_dependencies():
    graph = {"train": [("ok", "prep")], "report": [("any", "train"), ("notok", "prep")], "prep": []}
    assert ready(graph, {"prep": "Succeeded", "train": "Running", "report": "Queued"}) == {
        "train": MET,
        "report": NEVER,
    }
    assert ready(graph, {"prep": "Running", "train": "Queued", "report": "Queued"}) == {"train": WAIT, "report": WAIT}


def test_find_cycle_examples():
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"c": ["a"], "b": ["c"], "a": ["b"], "x": ["a"]}) == ["a", "b", "c", "a"]
    # Two cycles: the one reached first in sorted order.
    assert find_cycle({"z": ["y"], "y": ["z"], "m": ["n"], "n": ["m"]}) == ["m", "n", "m"]
    assert find_cycle({1: [2], 2: [3], 3: [1]}) == [1, 2, 3, 1]


def test_find_cycle_on_a_long_chain_needs_no_recursion():
    chain = {i: [i + 1] for i in range(5000)}
    assert find_cycle(chain) is None
    chain[5000] = [0]
    assert len(find_cycle(chain)) == 5002


# --- random DAGs played out -------------------------------------------------------------


@st.composite
def workflows(draw):
    size = draw(st.integers(1, 12))
    graph = {}
    for node in range(size):
        targets = draw(st.sets(st.integers(0, node - 1), max_size=3)) if node else set()
        graph[node] = [(draw(st.sampled_from(["ok", "any", "notok"])), target) for target in sorted(targets)]
    ends = {node: draw(st.sampled_from(["Succeeded", "Failed"])) for node in graph}
    keep = {node: draw(st.booleans()) for node in graph}
    seed = draw(st.integers(0, 2**16))
    return graph, ends, keep, seed


@SETTINGS
@given(workflows())
def test_a_simulated_dispatcher_starts_only_what_is_ready_and_leaves_nothing_waiting(workflow):
    graph, ends, keep, seed = workflow
    order = random.Random(seed)
    states = dict.fromkeys(graph, "Queued")
    for _ in range(4 * len(graph) + 4):
        verdicts = ready(graph, states)
        for node in graph:
            if states[node] != "Queued":
                continue
            verdict = verdicts.get(node, MET)
            if verdict == MET:
                for condition, target in graph[node]:
                    assert satisfied(condition, states[target]), (node, condition, target, states)
                states[node] = "Running"
            elif verdict == NEVER and not keep[node]:
                states[node] = "Cancelled"
        running = [node for node in graph if states[node] == "Running"]
        if running:  # one job ends per step, in a random order
            node = order.choice(running)
            states[node] = ends[node]
    final = ready(graph, states)
    kept = {node for node in graph if states[node] == "Queued" and final.get(node) == NEVER}
    for node, state in states.items():
        if node in kept:
            assert keep[node], (node, states)
            assert any(not satisfied(c, states[t]) and states[t] != "Queued" for c, t in graph[node])
        elif state == "Queued":
            # Waiting is left only behind a job kept with NEVER: it ends when its owner
            # cancels it (as Slurm's pending DependencyNeverSatisfied jobs do), never by itself.
            assert final[node] == WAIT and reaches(graph, node, kept), (node, states)
        else:
            assert state in ("Succeeded", "Failed", "Cancelled"), (node, states)
    if not kept:
        assert WAIT not in final.values()


def reaches(graph, node, targets):
    seen, stack = set(), [node]
    while stack:
        for _, target in graph[stack.pop()]:
            if target in targets:
                return True
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return False


# --- cycles -----------------------------------------------------------------------------


def topological_order(edges):
    """Kahn's algorithm, apart from the module: None when the graph has a cycle."""
    nodes = set(edges) | {t for targets in edges.values() for t in targets}
    incoming = {node: 0 for node in nodes}
    for targets in edges.values():
        for target in set(targets):
            incoming[target] += 1
    free = [node for node in nodes if incoming[node] == 0]
    order = []
    while free:
        node = free.pop()
        order.append(node)
        for target in set(edges.get(node, ())):
            incoming[target] -= 1
            if incoming[target] == 0:
                free.append(target)
    return order if len(order) == len(nodes) else None


GRAPHS = st.dictionaries(st.integers(0, 9), st.lists(st.integers(0, 9), max_size=4), max_size=10)


@SETTINGS
@given(GRAPHS, st.randoms())
def test_find_cycle_iff_no_topological_order(edges, shuffle):
    cycle = find_cycle(edges)
    assert (cycle is None) == (topological_order(edges) is not None)
    if cycle is not None:
        assert cycle[0] == cycle[-1] and len(cycle) >= 2
        assert len(set(cycle[:-1])) == len(cycle) - 1
        for source, target in zip(cycle, cycle[1:], strict=False):
            assert target in edges[source]
        # The same graph, its keys and edges in another order: the same cycle.
        keys = list(edges)
        shuffle.shuffle(keys)
        assert find_cycle({key: shuffle.sample(edges[key], len(edges[key])) for key in keys}) == cycle


# --- arrays -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "indexes", "limit"),
    [
        ("0-99", tuple(range(100)), None),
        ("0-99%5", tuple(range(100)), 5),
        ("1,3,5-7", (1, 3, 5, 6, 7), None),
        ("0-15:4", (0, 4, 8, 12), None),
        (" 7 ", (7,), None),
        ("5-7,1-6", (1, 2, 3, 4, 5, 6, 7), None),
        ("1000000", (1_000_000,), None),
    ],
)
def test_parse_array(text, indexes, limit):
    assert parse_array(text) == ArraySpec(indexes, limit)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "has no indexes"),
        ("%5", "has no indexes"),
        ("-1", "is not an index or a range"),
        ("0--3", "is not an index or a range"),
        ("9-3", "is a reversed range: write 3-9"),
        ("0-15:0", "step 0"),
        ("0-9%0", "is not a limit"),
        ("0-9%", "is not a limit"),
        ("0-1000", "more than 1000 indexes"),
        ("0-999,1000", "more than 1000 indexes"),
        ("1000001", "goes past 1000000"),
        ("1,a", '"a" is not an index or a range'),
    ],
)
def test_parse_array_refuses(text, words):
    [(path, message)] = field_errors(lambda: parse_array(text, "spec.array"))
    assert path == "spec.array"
    assert words in message


def test_max_size():
    assert len(parse_array("0-4", max_size=5).indexes) == 5
    assert "more than 4 indexes" in field_errors(lambda: parse_array("0-4", max_size=4))[0][1]


@SETTINGS
@given(st.sets(st.integers(0, 3000), min_size=1, max_size=200), st.none() | st.integers(1, 50))
def test_format_and_parse_round_trip(indexes, limit):
    spec = ArraySpec(tuple(sorted(indexes)), limit)
    assert parse_array(format_array(spec)) == spec


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300), st.integers(1, 7)), min_size=1, max_size=6),
    st.integers(1, 400),
)
def test_parse_array_text_with_steps(ranges, max_size):
    text = ",".join(f"{min(a, b)}-{max(a, b)}:{step}" for a, b, step in ranges)
    expected = sorted({i for a, b, step in ranges for i in range(min(a, b), max(a, b) + 1, step)})
    if len(expected) > max_size:
        assert "more than" in field_errors(lambda: parse_array(text, max_size=max_size))[0][1]
    else:
        assert parse_array(text, max_size=max_size).indexes == tuple(expected)


SEGMENTS = st.lists(st.text(st.sampled_from("ab{}x-\n: "), max_size=6), min_size=1, max_size=5)


@SETTINGS
@given(SEGMENTS, st.integers(0, 1_000_000))
def test_expand_replaces_every_marker_and_nothing_else(segments, index):
    segments = [segment for segment in segments if INDEX_MARKER not in segment]
    text = INDEX_MARKER.join(segments)
    result = expand(text, index)
    # Scanning left to right, every marker found in the text becomes the index, the rest stays.
    assert result == str(index).join(text.split(INDEX_MARKER))
    if "{" not in text and "}" not in text:
        assert result == str(index).join(segments)
        assert INDEX_MARKER not in result


def test_array_name():
    assert array_name("sweep", 7) == "sweep-7"
    assert array_name("sweep-{{index}}-lr", 7) == "sweep-7-lr"
    assert array_name("a" * 61, 9) == "a" * 61 + "-9"
    [(path, message)] = field_errors(lambda: array_name("a" * 61, 10))
    assert path == "metadata.name"
    assert "longer than 63 characters" in message
