"""The lent node pools a cycle plans with (queueing/tide.py): the pools staff declared
(LentPool rows: their nodes by label, their reclaim from their schedule) and the nodes a
lender's controller annotated (`jobdash.io/lent-until`). A declared pool not lent now
(between nights, disabled) bars its nodes altogether: they are the online side's."""

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

from django.conf import settings

from jobdash.cluster.gateway import NodeInfo
from jobdash.jobs import lent
from jobdash.jobs.models import LentPool as DeclaredPool
from queueing.tide import LentPool


def declared_pools() -> list[DeclaredPool]:
    return list(DeclaredPool.objects.all())


def lent_pools(nodes: Iterable[NodeInfo], declared: Iterable[DeclaredPool], now: float) -> tuple[LentPool, ...]:
    nodes = list(nodes)
    moment = datetime.fromtimestamp(now, UTC)
    default_notice = float(settings.JOBDASH_LENT_NOTICE_SECONDS)
    pools: list[LentPool] = []
    for pool in declared:
        members = frozenset(
            node.name for node in nodes if all(node.labels.get(k) == v for k, v in pool.node_selector.items())
        )
        if not members:
            continue
        window = lent.window(pool, moment)
        if window is None:  # not lent now: barred, as a pool whose notice has begun
            pools.append(LentPool(pool.name, members, now, 0.0, pool.timezone))
        else:
            pools.append(
                LentPool(
                    pool.name, members, window.reclaim_at.timestamp(), window.notice.total_seconds(), pool.timezone
                )
            )
    declared_names = {pool.name for pool in pools}
    annotated: dict[tuple[str, float, float], set[str]] = defaultdict(set)
    for node in nodes:
        if node.lent is not None and node.lent.pool not in declared_names:
            notice = default_notice if node.lent.notice_s is None else node.lent.notice_s
            annotated[node.lent.pool, node.lent.until, notice].add(node.name)
    for (name, until, notice), members_set in sorted(annotated.items()):
        # (one pool name with nodes lent until different times: each time its own pool)
        taken = name if sum(1 for key in annotated if key[0] == name) == 1 else f"{name}@{int(until)}"
        pools.append(LentPool(taken, frozenset(members_set), until, notice, settings.TIME_ZONE))
    return tuple(pools)
