"""System checks: a webhook configuration that would queue jobs jobdash cannot release."""

from django.conf import settings
from django.core.checks import Error, register

from .decide import MODES


@register()
def webhook_settings(app_configs=None, **kwargs):
    problems = []
    mode = settings.JOBDASH_WEBHOOK_MODE
    if mode not in MODES:
        problems.append(
            Error(f"JOBDASH_WEBHOOK_MODE is {mode!r}", hint=f"one of {', '.join(MODES)}", id="webhooks.E001")
        )
    if mode == "suspend" and settings.JOBDASH_RELEASE_MODE != "unsuspend":
        problems.append(
            Error(
                "JOBDASH_WEBHOOK_MODE=suspend needs JOBDASH_RELEASE_MODE=unsuspend",
                hint="the webhook leaves the job's object in the cluster, suspended; release mode create would find it "
                "there and fail the job",
                id="webhooks.E002",
            )
        )
    if not settings.JOBDASH_OWN_IDENTITIES:
        problems.append(
            Error(
                "JOBDASH_OWN_IDENTITIES is empty",
                hint="name the user jobdash talks to the cluster as (system:serviceaccount:jobdash:jobdash), "
                "or the webhook refuses jobdash's own releases",
                id="webhooks.E003",
            )
        )
    return problems
