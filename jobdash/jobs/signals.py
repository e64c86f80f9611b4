from django.dispatch import Signal

# Sent after a commit that changes what the admission cycle would decide (a submission,
# a cancel, a priority change). The dispatcher app listens and runs a cycle soon.
queue_changed = Signal()
