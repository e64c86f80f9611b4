"""The submit check's word on nodes: a pod no node could hold can never run, whatever the
quota says. The planner's rule and words (queueing.node_screen), on the nodes the last cycle
published; a node sharing its cards gives one pod one card each (HAMi's nvidia.com/gpu
counts vGPUs, not whole GPUs)."""

from queueing.cards import SharedCards
from queueing.devices import MODELS
from queueing.node_screen import never_fits as never_fits_nodes
from queueing.reasons import describe
from queueing.snapshot import Node, gang_of
from queueing.workload import Workload

from .card_selectors import cards_of, sharing_model


def _node(row: dict) -> Node | None:
    """A published node as the planner's Node (its cards, not their use); None if odd."""
    allocatable = row.get("allocatable")
    if not isinstance(row.get("name"), str) or not isinstance(allocatable, dict):
        return None
    # Canonical integers as published (a bool is JSON's, not a count).
    amounts = {str(name): value for name, value in allocatable.items() if type(value) is int and value >= 0}
    cards = cards_of(row)
    model = sharing_model(cards)
    shared = SharedCards(tuple(card["memory"] for card in cards), model=model) if model in MODELS else None
    return Node(row["name"], amounts, unschedulable=bool(row.get("unschedulable")), cards=shared)


def never_fits(workload: Workload, nodes: list) -> str:
    """Why a pod of the job fits no node even empty ("never fits any node: ..."); "" when
    every pod fits some node, or no node is known (no cycle yet)."""
    known = [node for node in map(_node, (n for n in nodes if isinstance(n, dict))) if node is not None]
    if not known:
        return ""
    outcome = never_fits_nodes(gang_of(workload), known)
    return "" if outcome is None else describe(*outcome, workload.namespace or "")
