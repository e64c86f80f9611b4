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
    # Nodes one lender lends in one pool until one time are one pool; its longest notice
    # stands (from then on nothing new starts on any of them).
    annotated: dict[tuple[str, float], set[str]] = defaultdict(set)
    notices: dict[tuple[str, float], float] = {}
    for node in nodes:
        if node.lent is not None and node.lent.pool not in declared_names:
            key = (node.lent.pool, node.lent.until)
            annotated[key].add(node.name)
            notice = default_notice if node.lent.notice_s is None else node.lent.notice_s
            notices[key] = max(notices.get(key, 0.0), notice)
    times: dict[str, int] = defaultdict(int)
    for name, _ in annotated:
        times[name] += 1
    for (name, until), members_set in sorted(annotated.items()):
        taken = name if times[name] == 1 else f"{name}@{int(until)}"
        pools.append(LentPool(taken, frozenset(members_set), until, notices[name, until], settings.TIME_ZONE))
    return tuple(pools)
