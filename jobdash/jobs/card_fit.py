"""The submit check's word on shared GPUs (issue 34): for each pod set asking a share of a
card (gpushare's aliyun.com/gpu-mem, HAMi's nvidia.com/gpumem), whether a node has that
many cards with that much memory free now, as the last cycle saw the cards.

A pod fits a node's total memory and still no card: the check is per card, as the
extender's. It says where it fits (the card binpack would choose), or how much the roomiest
card has free, or that no card in the cluster is that large (it can never run).
"""

from collections.abc import Iterable

from queueing.devices import MODELS
from queueing.workload import Workload

from .card_presenters import card_label, mib, model_name
from .card_selectors import cards_of


def share_demands(workload: Workload) -> list[tuple[str, int, str, int, int]]:
    """(role, pods, model, MiB per card, cards) for each pod set asking a share of a card."""
    found = []
    for pod_set in workload.pod_sets:
        for model in MODELS.values():
            if pod_set.requests.get(model.memory, 0) <= 0:
                continue  # whole cards only (nvidia.com/gpu alone): not a share
            demand = model.demand(pod_set.requests)
            if demand is not None:
                found.append((pod_set.role, pod_set.count, model.name, *demand))
    return found


def _usable(node: dict) -> bool:
    return not node.get("unschedulable") and not node.get("failed")


def _fit(model: str, memory: int, count: int, nodes: Iterable[dict]) -> dict:
    shared = [(node, [c for c in cards_of(node) if c["model"] == model]) for node in nodes if isinstance(node, dict)]
    if not any(cards for _, cards in shared):
        return {
            "verdict": "never",
            "message": f"no GPU in the cluster is shared by {model_name(model)}: it can never run",
        }
    large = [(node, [c for c in cards if c["memory"] >= memory]) for node, cards in shared]
    if not any(len(cards) >= count for _, cards in large):
        what = f"{count} GPUs of one node have" if count > 1 else "GPU in the cluster has"
        return {"verdict": "never", "message": f"no {what} {mib(memory)}: it can never run"}
    best: tuple[int, str, list[dict]] | None = None  # (the chosen cards' free, node, cards)
    roomiest: tuple[int, str, int] | None = None  # (free, node, index)
    for node, cards in shared:
        if not _usable(node):
            continue
        for card in cards:
            if roomiest is None or card["free"] > roomiest[0]:
                roomiest = (card["free"], str(node.get("name", "")), card["index"])
        fitting = sorted((c for c in cards if c["free"] >= memory), key=lambda c: (c["free"], c["index"]))
        if len(fitting) >= count:
            chosen = sorted(fitting[:count], key=lambda c: c["index"])
            left = sum(c["free"] for c in chosen)
            if best is None or left < best[0]:  # binpack: the fullest cards that hold it
                best = (left, str(node.get("name", "")), chosen)
    if best is not None:
        _, name, chosen = best
        label = card_label([c["index"] for c in chosen])
        frees = " and ".join(mib(c["free"]) for c in chosen)
        verb = "has" if count == 1 else "have"
        where = "a card" if count == 1 else f"{count} cards"
        return {"verdict": "fits", "message": f"fits {where} now: {name} {label} {verb} {frees} free"}
    most = (
        "no card is free" if roomiest is None else f"the most is {mib(roomiest[0])} ({roomiest[1]} GPU {roomiest[2]})"
    )
    what = "card has" if count == 1 else f"node has {count} cards with"
    return {"verdict": "not now", "message": f"no {what} {mib(memory)} free now: {most}"}


def card_checks(workload: Workload, nodes: list[dict]) -> list[dict]:
    """Per pod set asking a share of a card: {role, pods, model, memory, cards, verdict
    ("fits" | "not now" | "never"), message}. [] when none asks one or no node is known."""
    rows = []
    for role, pods, model, memory, count in share_demands(workload) if nodes else ():
        fit = _fit(model, memory, count, nodes)
        rows.append({"role": role, "pods": pods, "model": model, "memory": mib(memory), "cards": count, **fit})
    return rows
