"""Helpers shared by the client and command-line tests."""

from datetime import UTC, datetime, timedelta

from jobdash.jobs.models import Job


def give_a_late_estimate(job_id: int, likely: datetime, late: datetime) -> None:
    """What the dispatcher would have written for a job still queued past its first late
    bound (given two hours ago), with a run-time prediction from the user's runs."""
    now = datetime.now(UTC)
    Job.objects.filter(pk=job_id).update(
        eta=likely,
        eta_late=late,
        eta_first_at=now - timedelta(hours=2),
        eta_first=now - timedelta(hours=1),
        eta_first_late=now - timedelta(minutes=30),
        predicted_duration_s=2520.0,
        predicted_p90_s=7560.0,
        prediction_source="user+name",
    )
