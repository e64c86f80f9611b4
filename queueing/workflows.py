"""Workflow graphs and job arrays: when a dependent may start, cycles, Slurm's --array.

A job's dependencies are conditions on other jobs' states (Slurm's afterok, afterany,
afternotok). Each is met, still waiting, or can never be met; a job starts when all are
met, and one that can never start is cancelled (or kept queued if its owner asked).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .errors import FieldError, ManifestError

MET, WAIT, NEVER = "met", "wait", "never"
FINISHED = frozenset({"Succeeded", "Failed", "Cancelled"})
_FAILED = frozenset({"Failed", "Cancelled"})

MAX_INDEX = 1_000_000
INDEX_MARKER = "{{index}}"
MAX_NAME = 63
_RANGE = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")
_ARRAY_HELP = "use indexes and ranges such as 0-99, 1,3,5-7 or 0-15:4 (a step), with %N to run at most N at once"


class _Sortable(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


K = TypeVar("K", bound=_Sortable)


def outcome(condition: str, state: str) -> str:
    """Whether one dependency (``condition`` on a job now in ``state``) is met."""
    if condition == "ok":
        return MET if state == "Succeeded" else NEVER if state in _FAILED else WAIT
    if condition == "any":
        return MET if state in FINISHED else WAIT
    if condition == "notok":
        return MET if state in _FAILED else NEVER if state == "Succeeded" else WAIT
    raise ValueError(f"unknown dependency condition {condition!r}")


_TO = {"ok": "succeed", "any": "end", "notok": "fail"}  # what a dependent waits for a job to do


def waits_words(waits: Iterable[Sequence[Any]]) -> str:
    """(job id, name, condition) -> "train (#42) to succeed; prep (#41) to end"."""
    return "; ".join(f"{name} (#{on}) to {_TO[condition]}" for on, name, condition in waits)


def never_words(never: Iterable[Sequence[Any]]) -> str:
    """(job id, name, condition, state) -> "train (#42) failed: it was to succeed"."""
    return "; ".join(
        f"{name} (#{on}) {state.lower()}: it was to {_TO[condition]}" for on, name, condition, state in never
    )


def combined(outcomes: Iterable[str]) -> str:
    seen = set(outcomes)
    return NEVER if NEVER in seen else WAIT if WAIT in seen else MET


def ready(graph: Mapping[K, Iterable[tuple[str, K]]], states: Mapping[K, str]) -> dict[K, str]:
    """For each node with dependencies (``(condition, target)`` pairs), their combined outcome
    given every node's state."""
    return {
        node: combined(outcome(condition, states[target]) for condition, target in dependencies)
        for node, dependencies in graph.items()
        if dependencies
    }


def find_cycle(edges: Mapping[K, Iterable[K]]) -> list[K] | None:
    """A cycle as a path that ends where it starts (``[a, b, a]``), or None. Nodes and their
    edges are walked in sorted order, so the same graph always gives the same cycle."""
    targets = {node: sorted(set(successors)) for node, successors in edges.items()}
    done: set[K] = set()
    for root in sorted(set(targets) | {target for successors in targets.values() for target in successors}):
        if root in done:
            continue
        # Depth first without recursion (a workflow may be long); the path is the grey nodes.
        path, on_path = [root], {root}
        pending = [iter(targets.get(root, ()))]
        while pending:
            successor = next(pending[-1], None)
            if successor is None:
                done.add(path[-1])
                on_path.discard(path.pop())
                pending.pop()
            elif successor in on_path:
                return [*path[path.index(successor) :], successor]
            elif successor not in done:
                path.append(successor)
                on_path.add(successor)
                pending.append(iter(targets.get(successor, ())))
    return None


@dataclass(frozen=True)
class ArraySpec:
    indexes: tuple[int, ...]  # sorted, unique
    limit: int | None  # at most this many run at once (Slurm's %N); None: no limit


def parse_array(text: str, path: str = "array", max_size: int = 1000) -> ArraySpec:
    """Slurm's --array: ``0-99``, ``0-99%5``, ``1,3,5-7``, ``0-15:4``."""
    body, percent, limit_text = text.strip().partition("%")
    errors: list[str] = []
    limit = None
    if percent:
        if not limit_text.strip().isdigit() or int(limit_text) < 1:
            errors.append(f'"%{limit_text}" is not a limit: %N runs at most N (1 or more) at once')
        else:
            limit = int(limit_text)
    indexes: set[int] = set()
    items = body.split(",") if body.strip() else []
    if not items:
        errors.append(f'"{text}" has no indexes: {_ARRAY_HELP}')
    for item in items:
        problem = _add_range(item.strip(), indexes, max_size)
        if problem and problem not in errors:
            errors.append(problem)
    if errors:
        raise ManifestError([FieldError(path, error) for error in errors])
    return ArraySpec(tuple(sorted(indexes)), limit)


def format_array(spec: ArraySpec) -> str:
    """The spec as text parse_array reads back (consecutive indexes as ranges)."""
    runs: list[list[int]] = []
    for index in spec.indexes:
        if runs and runs[-1][1] == index - 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    text = ",".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)
    return f"{text}%{spec.limit}" if spec.limit is not None else text


def expand(text: str, index: int) -> str:
    """The manifest text for one index of an array: every marker replaced by the index."""
    return text.replace(INDEX_MARKER, str(index))


def array_name(name: str, index: int) -> str:
    """The name of the job at ``index`` of an array: the marker in the name replaced, else
    the name + "-" + index."""
    result = expand(name, index) if INDEX_MARKER in name else f"{name}-{index}"
    if len(result) > MAX_NAME:
        raise ManifestError(
            [
                FieldError(
                    "metadata.name",
                    f'"{result}" (index {index}) is longer than {MAX_NAME} characters: shorten the name',
                )
            ]
        )
    return result


def _add_range(item: str, indexes: set[int], max_size: int) -> str | None:
    """Adds the item's indexes; the problem with it, if any."""
    match = _RANGE.fullmatch(item)
    if not match:
        return f'"{item}" is not an index or a range: {_ARRAY_HELP}'
    first = int(match[1])
    last = int(match[2]) if match[2] is not None else first
    step = int(match[3]) if match[3] is not None else 1
    if last < first:
        return f'"{item}" is a reversed range: write {last}-{first}'
    if step < 1:
        return f'"{item}" has step 0: the step must be 1 or more'
    if last > MAX_INDEX:
        return f'"{item}" goes past {MAX_INDEX}, the largest index'
    if (last - first) // step + 1 > max_size or len(indexes | set(range(first, last + 1, step))) > max_size:
        return f"more than {max_size} indexes: an array holds at most {max_size} jobs"
    indexes.update(range(first, last + 1, step))
    return None
