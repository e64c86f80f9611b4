"""Writes for API tokens: the token page and the admin both come through here.

One token per user (DRF's authtoken model). Issuing replaces the old token in the same
transaction, so a user never has two valid keys and never none in between.
"""

from django.db import transaction
from rest_framework.authtoken.models import Token


def token_issue(user) -> Token:
    """A new token for `user`; the old one, if any, stops working."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def token_revoke(user) -> bool:
    """Returns whether there was a token to revoke."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return bool(deleted)
