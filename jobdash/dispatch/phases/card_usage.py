"""What is on each shared GPU card, for the snapshot (queueing/cards.py checks cards one by one).

A card's memory is taken by
1. the pods bound to its node that name it (gpushare's ALIYUN_COM_GPU_MEM_IDX, HAMi's
   devices annotation); a bound pod that names no card is charged where binpack would put it;
2. the pods jobdash pinned to it that the scheduler has not bound yet (they name it too);
3. the planned pods of released jobs that have no pod yet: their planned card (Job.cards).
So a card promised to a pod on its way is not promised again in the next cycle.
"""

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping

from jobdash.cluster import kinds
from jobdash.cluster.devices import NodeCards
from jobdash.cluster.gateway import NodeInfo, ObjectKey, PodInfo
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.jobs.models import State
from queueing.cards import CardPod, SharedCards
from queueing.devices import MODELS
from queueing.snapshot import Node

Slot = tuple[str, int, str]  # (role, index, node)


def shared_cards(
    nodes: Iterable[NodeInfo],
    live_pods: Iterable[PodInfo],
    active: Iterable[ActiveJob],
    pods_of_jobs: Mapping[ObjectKey, list[PodInfo]],
    lost: Collection[Slot] = (),
) -> dict[str, SharedCards]:
    """Per node that shares its cards, what is on them (`lost`: planned slots placed anew)."""
    sharing = {node.name: node.cards for node in nodes if node.cards is not None}
    if not sharing:
        return {}
    on: dict[str, list[CardPod]] = defaultdict(list)
    for pod in live_pods:
        node = _card_node(pod)
        if node in sharing and not pod.terminated and not pod.deleting:
            on[node].extend(_charges(sharing[node], pod.requests, pod.cards))
    for job in active:
        if job.state == State.RELEASED and job.cards:
            for node, requests, ids in _awaited(job, pods_of_jobs.get(job.key, ()), sharing, lost):
                on[node].extend(_charges(sharing[node], requests, ids))
    return {name: SharedCards(cards.memory, tuple(on.get(name, ())), cards.model) for name, cards in sharing.items()}


def _card_node(pod: PodInfo) -> str | None:
    """The node whose cards the pod holds: its own, or the one jobdash pinned it to (its card
    named, its gate lifted) while the scheduler has not bound it yet."""
    return pod.node_name or (pod.selected_node if pod.cards and not pod.gates else None)


def _charges(cards: NodeCards, requests: Mapping[str, int], named: tuple[str, ...]) -> list[CardPod]:
    """A pod's share of each of its cards; cards it does not name are left to binpack."""
    demand = MODELS[cards.model].demand(requests, whole_card=max(cards.memory, default=0))
    if demand is None:
        return []
    memory, count = demand
    indexes = [index for index in (cards.index(card) for card in named) if index is not None]
    if len(indexes) != count:
        return [CardPod(memory) for _ in range(count)]
    return [CardPod(memory, index) for index in indexes]


def _awaited(
    job: ActiveJob, pods: Iterable[PodInfo], sharing: Mapping[str, NodeCards], lost: Collection[Slot]
) -> list[tuple[str, Mapping[str, int], tuple[str, ...]]]:
    """The job's planned card slots no live pod holds yet: (node, the role's requests, its
    cards as the node names them)."""
    roles = [ps.role for ps in job.workload.pod_sets]
    held: Counter[tuple[str, str, tuple[str, ...]]] = Counter()
    for pod in pods:
        node = pod.node_name or pod.selected_node
        if node and pod.cards and not pod.terminated and not pod.deleting:
            held[kinds.pod_role(job.kind_key, pod, roles).lower(), node, pod.cards] += 1
    nodes = {(role, index): node for role, index, node in job.placement}
    requests = {ps.role.lower(): ps.requests for ps in job.workload.pod_sets}
    awaited = []
    for role, index, cards in job.cards:
        node = nodes.get((role, index))
        if node is None or node not in sharing or (role, index, node) in lost or role.lower() not in requests:
            continue
        ids = sharing[node].ids
        key = (role.lower(), node, tuple(ids[card] for card in cards if card < len(ids)))
        if held[key] > 0:
            held[key] -= 1
        else:
            awaited.append((node, requests[role.lower()], key[2]))
    return awaited


def card_rows(
    nodes: Iterable[Node],
    infos: Iterable[NodeInfo],
    live_pods: Iterable[PodInfo],
    jobs_of_pods: Mapping[tuple[str, str], str],
) -> dict[str, list[dict]]:
    """Per node that shares its cards, each card as the pages draw it: its memory, what is
    taken (the snapshot's: pods on their way included) and the pods that name it, with
    their jobs (`jobs_of_pods`: (namespace, pod) -> "namespace/job", jobdash's jobs)."""
    ids = {info.name: info.cards for info in infos if info.cards is not None}
    named: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for pod in live_pods:
        where = _card_node(pod)
        cards = ids.get(where) if where is not None else None
        if cards is None or where is None or pod.terminated or pod.deleting:
            continue
        for charge in _charges(cards, pod.requests, pod.cards):
            if charge.card is not None:
                named[where, charge.card].append(
                    {
                        "pod": f"{pod.namespace}/{pod.name}",
                        "job": jobs_of_pods.get((pod.namespace, pod.name), ""),
                        "memory": charge.memory,
                        "bound": pod.node_name is not None,
                    }
                )
    rows: dict[str, list[dict]] = {}
    for node in nodes:
        if node.cards is None or node.name not in ids:
            continue
        rows[node.name] = [
            {
                "index": index,
                "id": ids[node.name].ids[index],
                "memory": memory,
                "used": used,
                "model": node.cards.model,
                "pods": named.get((node.name, index), []),
            }
            for index, (memory, used) in enumerate(zip(node.cards.memory, node.cards.used, strict=True))
        ]
    return rows
