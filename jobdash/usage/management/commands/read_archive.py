"""`manage.py read_archive FILE`: the jobs of a retention archive, one JSON object a line."""

import json

from django.core.management.base import BaseCommand, CommandError

from jobdash.usage import archive


class Command(BaseCommand):
    help = "Print the jobs archived in FILE (var/archive/YYYY-MM.<n>.jsonl.gz) as JSON lines."

    def add_arguments(self, parser):
        parser.add_argument("file")

    def handle(self, *args, file, **options):
        try:
            for job in archive.read(file):
                self.stdout.write(json.dumps(job, default=archive.json_default, sort_keys=True))
        except OSError as error:
            raise CommandError(f"{file}: {error}") from None
