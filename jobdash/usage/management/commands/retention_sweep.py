"""`manage.py retention_sweep [--days N] [--dry-run]`: what the daily beat task does, by hand."""

import json

from django.core.management.base import BaseCommand, CommandError

from jobdash.usage import retention


class Command(BaseCommand):
    help = "Archive and remove finished jobs older than --days (default JOBDASH_RETENTION_DAYS)."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=None, help="Age in days; 0 removes nothing.")
        parser.add_argument("--dry-run", action="store_true", help="Count by month what would go; write nothing.")
        parser.add_argument("--batch", type=int, default=retention.BATCH, help="Jobs per transaction.")

    def handle(self, *args, days=None, dry_run=False, batch=retention.BATCH, **options):
        if days is not None and days < 0:
            raise CommandError("--days: must be at least 0")
        if batch < 1:
            raise CommandError("--batch: must be at least 1")
        done = retention.sweep(days, dry_run=dry_run, batch=batch)
        self.stdout.write(json.dumps({"dry_run": dry_run, **done.as_dict()}))
