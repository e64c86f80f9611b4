"""The task that keeps UsageDay current: the leader's beat sends it every minute
(jobdash/dispatch/beat.py); it folds every settled event."""

from celery import shared_task

from . import services


@shared_task(name="jobdash.usage_fold", ignore_result=True)
def usage_fold(term: int | None = None) -> dict:
    """`term`: the leader's, as beat adds it to every task; a fold needs none (the mark's lock
    keeps two folds apart, leader or not)."""
    return {"folded": services.fold_all()}
