from django.utils.functional import SimpleLazyObject

from . import status


def dispatcher(request) -> dict:
    """The leader for the page header; queried only by pages that show it."""
    return {"leader": SimpleLazyObject(status.leader)}
