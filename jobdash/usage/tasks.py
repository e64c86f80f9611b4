"""The beat task that keeps UsageDay current: every minute, every settled event folded."""

from celery import shared_task

from . import services

FOLD_ENTRY = "jobdash-usage-fold"
FOLD_EVERY_SECONDS = 60.0


@shared_task(name="jobdash.usage_fold", ignore_result=True)
def usage_fold(term: int | None = None) -> dict:
    """`term`: the leader's, as beat adds it to every task; a fold needs none (the mark's lock
    keeps two folds apart, leader or not)."""
    return {"folded": services.fold_all()}
