"""`manage.py rebuild_usage`: forgets the usage rows and folds every job event again, from the
first (after a bug fix, or to check the incremental fold): the same numbers."""

from django.core.management.base import BaseCommand

from jobdash.usage import services


class Command(BaseCommand):
    help = "Recompute the usage summary (UsageDay) from every job's timeline."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=10_000, help="Events folded per step (default 10000).")

    def handle(self, *args, batch: int, **options):
        folded = services.rebuild(batch=batch)
        self.stdout.write(f"folded {folded} events")
