from django.conf import settings
from django.db import models


class PlatformIdentity(models.Model):
    """A user the platform vouched for (OIDC, the authenticating proxy, an admission
    request), with the groups it last named. The groups are kept for role checks that ask
    Kubernetes about the user (a SubjectAccessReview names user and groups); a user without
    this row is a local account."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="platform_identity")
    groups = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=16)  # oidc | proxy | admission: who vouched last
    seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "platform identities"

    def __str__(self) -> str:
        return f"{self.user} ({self.source})"
