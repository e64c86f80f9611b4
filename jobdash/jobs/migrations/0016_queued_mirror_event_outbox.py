"""The QueuedJob mirror's rows and the outbox of Kubernetes Events: a trigger puts every
JobEvent of a state change in the outbox in the JobEvent's own transaction."""

import django.db.models.deletion
from django.db import migrations, models

TYPES = ("Submitted", "Requeued", "Released", "Running", "Preempted", "Succeeded", "Failed", "Cancelled", "Refused")
WHEN = "NEW.type IN (" + ", ".join(f"'{t}'" for t in TYPES) + ")"

POSTGRESQL = f"""
CREATE FUNCTION jobs_jobevent_to_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO jobs_eventoutbox (event_id) VALUES (NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_jobevent_to_outbox AFTER INSERT ON jobs_jobevent
    FOR EACH ROW WHEN ({WHEN}) EXECUTE FUNCTION jobs_jobevent_to_outbox();
"""
POSTGRESQL_BACK = """
DROP TRIGGER IF EXISTS jobs_jobevent_to_outbox ON jobs_jobevent;
DROP FUNCTION IF EXISTS jobs_jobevent_to_outbox();
"""
class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0015_pod_jobs"),
    ]

    operations = [
        migrations.CreateModel(
            name="QueuedMirror",
            fields=[
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="queued_mirror",
                        serialize=False,
                        to="jobs.job",
                    ),
                ),
                ("name", models.CharField(max_length=253)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name="EventOutbox",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "event",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="outbox", to="jobs.jobevent"
                    ),
                ),
            ],
        ),
        migrations.RunSQL(POSTGRESQL, POSTGRESQL_BACK),
    ]
