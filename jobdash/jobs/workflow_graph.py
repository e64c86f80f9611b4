"""Server-rendered SVG geometry for a workflow's page: no JavaScript library, the template
draws the shapes computed here (as charts.py does for the queue chart).

A graph is laid out in layers by dependency depth, left to right (a job's layer is one more
than its deepest dependency's); an array is a grid of its indexes. The drawing keeps its
natural size and scrolls in its box rather than shrinking: a DAG of 50 or an array of 100
stays legible. Names are user input: the template escapes them, nothing here builds markup.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

NODE_W, NODE_H = 168, 40
COLUMN_W, ROW_H = NODE_W + 72, NODE_H + 18  # the gap between columns holds the edges' labels
MARGIN = 12
NAME_CHARS = 22  # what fits in a node; the full name is in its tooltip and the table

CELL_W, CELL_H, CELL_GAP = 48, 32, 4
MAX_GRID_COLUMNS = 20


@dataclass(frozen=True)
class GraphJob:
    id: int
    name: str
    state: str
    index: int | None = None  # an array's index
    after: Sequence[tuple[str, int]] = field(default_factory=tuple)  # (condition, job id) it waits for


def short(name: str, limit: int = NAME_CHARS) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def depths(jobs: Sequence[GraphJob]) -> dict[int, int]:
    """Each job's layer: 0 without dependencies in the workflow, else one more than its
    deepest one's. Dependencies outside the workflow do not count (the table lists them)."""
    inside = {job.id for job in jobs}
    parents = {job.id: {on for _, on in job.after if on in inside and on != job.id} for job in jobs}
    found: dict[int, int] = {}
    # Layer by layer (Kahn's order), not recursively: a chain of a thousand is fine.
    ready = [job.id for job in jobs if not parents[job.id]]
    while ready:
        for job_id in ready:
            found[job_id] = 1 + max((found[on] for on in parents[job_id]), default=-1)
        ready = [i for i in parents if i not in found and parents[i] <= found.keys()]
    for job in jobs:  # (a cycle is refused at submission; were one stored, it sits in layer 0)
        found.setdefault(job.id, 0)
    return found


def _ordered_layers(jobs: Sequence[GraphJob], depth: dict[int, int]) -> list[list[GraphJob]]:
    """Jobs per layer; within one, by the mean row of their dependencies (fewer crossings),
    then in submission order."""
    layers: list[list[GraphJob]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for job in jobs:
        layers[depth[job.id]].append(job)
    row: dict[int, float] = {}
    for layer in layers:
        order = {job.id: i for i, job in enumerate(layer)}
        layer.sort(key=partial(_mean_parent_row, row=row, order=order))
        for i, job in enumerate(layer):
            row[job.id] = i
    return layers


def _mean_parent_row(job: GraphJob, row: dict[int, float], order: dict[int, int]) -> tuple[float, int]:
    rows = [row[on] for _, on in job.after if on in row]
    return (sum(rows) / len(rows) if rows else float(order[job.id]), order[job.id])


def dag(jobs: Sequence[GraphJob]) -> dict:
    """Nodes (boxes) and edges (curves with their condition) of a workflow's graph."""
    layers = _ordered_layers(jobs, depths(jobs))
    tallest = max((len(layer) for layer in layers), default=0)
    nodes, at = [], {}
    for column, layer in enumerate(layers):
        offset = (tallest - len(layer)) * ROW_H / 2  # each layer centred on the tallest
        for row, job in enumerate(layer):
            x, y = MARGIN + column * COLUMN_W, MARGIN + offset + row * ROW_H
            at[job.id] = (x, y)
            nodes.append(_node(job, x, y))
    names = {job.id: job.name for job in jobs}
    edges = []
    for job in jobs:
        for condition, on in job.after:
            if on not in at:
                continue
            (x1, y1), (x2, y2) = at[on], at[job.id]
            x1, y1, y2 = x1 + NODE_W, y1 + NODE_H / 2, y2 + NODE_H / 2
            bend = (x2 - x1) / 2
            edges.append(
                {
                    "path": f"M{_n(x1)},{_n(y1)} C{_n(x1 + bend)},{_n(y1)} {_n(x2 - bend)},{_n(y2)} {_n(x2)},{_n(y2)}",
                    "condition": condition,
                    "label_x": _n(x1 + (x2 - x1) / 2),
                    "label_y": _n(y1 + (y2 - y1) / 2 - 3),
                    "source": names[on],
                    "target": job.name,
                }
            )
    return {
        "kind": "dag",
        "nodes": nodes,
        "edges": edges,
        "width": _n(2 * MARGIN + max(len(layers) * COLUMN_W - (COLUMN_W - NODE_W), 0)),
        "height": _n(2 * MARGIN + max(tallest * ROW_H - (ROW_H - NODE_H), 0)),
        "node_w": NODE_W,
        "node_h": NODE_H,
    }


def _node(job: GraphJob, x: float, y: float) -> dict:
    return {
        "id": job.id,
        "name": job.name,
        "label": short(job.name),
        "state": job.state,
        "x": _n(x),
        "y": _n(y),
        "text_x": _n(x + 8),
        "name_y": _n(y + 16),
        "state_y": _n(y + 32),
    }


def grid(jobs: Sequence[GraphJob]) -> dict:
    """An array as a grid of its indexes, coloured by state, ten a row (twenty above 100)."""
    columns = min(len(jobs), 10 if len(jobs) <= 100 else MAX_GRID_COLUMNS)
    cells = []
    for i, job in enumerate(jobs):
        x = MARGIN + (i % columns) * (CELL_W + CELL_GAP)
        y = MARGIN + (i // columns) * (CELL_H + CELL_GAP)
        cells.append(
            {
                "id": job.id,
                "name": job.name,
                "state": job.state,
                "index": job.index if job.index is not None else i,
                "x": x,
                "y": y,
                "text_x": x + CELL_W // 2,
                "text_y": y + CELL_H // 2,
            }
        )
    rows = -(-len(jobs) // columns) if columns else 0
    return {
        "kind": "array",
        "cells": cells,
        "width": 2 * MARGIN + max(columns * (CELL_W + CELL_GAP) - CELL_GAP, 0),
        "height": 2 * MARGIN + max(rows * (CELL_H + CELL_GAP) - CELL_GAP, 0),
        "cell_w": CELL_W,
        "cell_h": CELL_H,
    }


def drawing(kind: str, jobs: Iterable[GraphJob]) -> dict:
    """The picture of a workflow: a grid for an array, layers for a graph."""
    jobs = list(jobs)
    return grid(jobs) if kind == "array" else dag(jobs)


def _n(value: float) -> float | int:
    """Coordinates as short as they can be written."""
    value = round(value, 1)
    return int(value) if value == int(value) else value
