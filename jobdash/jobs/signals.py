from django.dispatch import Signal

# Sent after a commit that changes what the admission cycle would decide (a submission,
# a cancel, a priority change). The dispatcher app listens and runs a cycle soon.
queue_changed = Signal()


def send_queue_changed() -> None:
    """queue_changed for the jobs (what writers pass to transaction.on_commit)."""
    from .models import Job

    queue_changed.send(sender=Job)
