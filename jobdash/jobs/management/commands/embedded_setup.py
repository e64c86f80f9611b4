"""Idempotent set-up for `make run`: the admin, the demo member and the demo namespaces."""

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from jobdash.jobs.models import Namespace

DEMO_NAMESPACES = ("team-a", "team-b")
# The member var/kubeconfig signs in as (jobdash/embedded/rbac.py's MEMBERS): the same
# person in the UI, with the role the cluster's RBAC gives it (edit in team-a).
DEMO_MEMBER, DEMO_MEMBER_NAMESPACE = "demo", "team-a"


class Command(BaseCommand):
    help = (
        "Create the admin (password from JOBDASH_ADMIN_PASSWORD or generated once), the demo member "
        "(JOBDASH_DEMO_PASSWORD or generated once) and the demo namespaces."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"), help="the port the login line names")

    def handle(self, *args, port, **options):
        username = os.environ.get("JOBDASH_ADMIN_USER", "admin")
        password = _password("JOBDASH_ADMIN_PASSWORD", "admin-password")
        demo_password = _password("JOBDASH_DEMO_PASSWORD", "demo-password")
        User = get_user_model()
        admin, _ = User.objects.get_or_create(username=username, defaults={"is_staff": True, "is_superuser": True})
        admin.is_staff = admin.is_superuser = True
        admin.set_password(password)
        admin.save()
        member, _ = User.objects.get_or_create(username=DEMO_MEMBER)
        member.set_password(demo_password)
        member.save()
        for name in DEMO_NAMESPACES:
            # the PriorityClasses jobdash/embedded/embedded_cluster.yaml (and compose's
            # kubesim.yaml) seed: `normal` unless a job names one, members up to `high`
            # (`urgent` is staff's)
            namespace, _ = Namespace.objects.get_or_create(
                name=name, defaults={"default_priority_class": "normal", "max_priority_class": "high"}
            )
            namespace.members.add(admin)
            if name == DEMO_MEMBER_NAMESPACE:
                namespace.members.add(member)  # (where roles come from membership, not RBAC)
        self.stdout.write(
            self.style.SUCCESS(
                f"\njobdash on http://127.0.0.1:{port}/  —  log in as {username} / {password}\n"
                f"  or as the demo member {DEMO_MEMBER} / {demo_password} (edits jobs in {DEMO_MEMBER_NAMESPACE})\n"
                f"namespaces: {', '.join(DEMO_NAMESPACES)}\n"
            )
        )


def _password(variable: str, file_name: str) -> str:
    if os.environ.get(variable):
        return os.environ[variable]
    # Generated once and kept under var/, so every `make run` prints the same login.
    path = settings.VAR_DIR / file_name
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    path.write_text(password + "\n")
    path.chmod(0o600)
    return password
