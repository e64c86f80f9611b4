#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobdash.settings")
    from django.core.management import execute_from_command_line

    from jobdash import local_postgres

    # Without DATABASE_URL, the embedded PostgreSQL under var/ (started here unless running).
    with local_postgres.for_command():
        execute_from_command_line(sys.argv)
