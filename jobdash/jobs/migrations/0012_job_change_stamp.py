"""Every write of a job row stamps it with the writing transaction's id:
the leader reads what changed since its last read, by transaction horizon, instead of every
queued row's version each cycle (dispatch/state/cycle_cache.py)."""

from django.db import migrations

FORWARD = """
ALTER TABLE jobs_job ADD COLUMN changed_xid bigint;
CREATE FUNCTION jobs_job_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_xid := pg_current_xact_id()::text::bigint;
    RETURN NEW;
END
$$;
CREATE TRIGGER jobs_job_stamp_change BEFORE INSERT OR UPDATE ON jobs_job
    FOR EACH ROW EXECUTE FUNCTION jobs_job_stamp_change();
CREATE INDEX jobs_job_changed_xid ON jobs_job (changed_xid);
"""

BACKWARD = """
DROP TRIGGER IF EXISTS jobs_job_stamp_change ON jobs_job;
DROP FUNCTION IF EXISTS jobs_job_stamp_change();
DROP INDEX IF EXISTS jobs_job_changed_xid;
ALTER TABLE jobs_job DROP COLUMN IF EXISTS changed_xid;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0011_start_time_ranges"),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
