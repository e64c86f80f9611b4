from django.utils.functional import SimpleLazyObject

from . import cluster_selectors


def leader(request) -> dict:
    """The leader for the page header; queried only by pages that show it."""
    return {"leader": SimpleLazyObject(cluster_selectors.leader)}
