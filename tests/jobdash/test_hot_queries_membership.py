"""The submission's hand-written membership SQL (hot_queries.namespace_and_membership) agrees
with the rule it stands in for (selectors.is_member), on random worlds of users (active or
not, staff, superusers, anonymous), groups, namespaces, direct members and members through
groups; and a name jobdash does not manage is no namespace, for anyone."""

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.db import transaction
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jobdash.jobs import hot_queries, selectors
from jobdash.jobs.models import Namespace
from tests.examples import examples

USERS, GROUPS, NAMESPACES = 4, 3, 3

# Mostly active, mostly neither staff nor superuser: the users whose membership the SQL
# has to work out, rather than the ones the rule lets in or keeps out whatever they belong to.
users = st.fixed_dictionaries(
    {
        "is_active": st.sampled_from([True, True, False]),
        "is_staff": st.sampled_from([False, False, True]),
        "is_superuser": st.sampled_from([False, False, True]),
    }
)


def relation(rows: int, columns: int):
    """Which (row, column) pairs are related: a full table, so that relations are dense."""
    return st.lists(st.lists(st.booleans(), min_size=columns, max_size=columns), min_size=rows, max_size=rows)


worlds = st.fixed_dictionaries(
    {
        "users": st.lists(users, min_size=1, max_size=USERS),
        "groups": st.integers(0, GROUPS),
        "namespaces": st.integers(1, NAMESPACES),
        # taken as far as the counts drawn go
        "in_group": relation(USERS, GROUPS),  # user -> group
        "members": relation(NAMESPACES, USERS),  # namespace -> user
        "member_groups": relation(NAMESPACES, GROUPS),  # namespace -> group
    }
)
PLAIN = {"is_active": True, "is_staff": False, "is_superuser": False}
# One of each case the rule tells apart, in every run: a member through a group only, a
# direct member, an inactive direct member, a staff non-member, a superuser non-member.
EVERY_CASE = {
    "users": [
        PLAIN,
        PLAIN,
        {**PLAIN, "is_active": False},
        {**PLAIN, "is_staff": True},
        {**PLAIN, "is_superuser": True},
    ],
    "groups": 1,
    "namespaces": 2,
    "in_group": [[True], [False], [False], [False], [False]],
    "members": [[False, True, True, False, False], [False, False, False, False, False]],
    "member_groups": [[True], [False]],
}


def build(world) -> tuple[list, list[Namespace]]:
    users = [User.objects.create_user(f"user-{i}", **user_flags) for i, user_flags in enumerate(world["users"])]
    groups = [Group.objects.create(name=f"group-{i}") for i in range(world["groups"])]
    namespaces = [Namespace.objects.create(name=f"ns-{i}") for i in range(world["namespaces"])]
    for user, row in zip(users, world["in_group"], strict=False):
        user.groups.add(*(group for group, related in zip(groups, row, strict=False) if related))
    for ns, members, member_groups in zip(namespaces, world["members"], world["member_groups"], strict=False):
        ns.members.add(*(user for user, related in zip(users, members, strict=False) if related))
        ns.groups.add(*(group for group, related in zip(groups, member_groups, strict=False) if related))
    return [*users, AnonymousUser()], namespaces


def flags(user) -> str:
    return ", ".join(f"{flag}={getattr(user, flag)}" for flag in ("is_active", "is_staff", "is_superuser"))


@pytest.mark.django_db
@settings(max_examples=examples(80), deadline=None)
@given(world=worlds)
@example(world=EVERY_CASE)
def test_the_membership_sql_agrees_with_is_member(world):
    # Each example's rows are rolled back with its savepoint: the next starts from nothing.
    with transaction.atomic():
        users, namespaces = build(world)
        for user in users:
            for ns in namespaces:
                found, member = hot_queries.namespace_and_membership(ns.name, user)
                assert found == ns
                assert member == selectors.is_member(user, ns), f"{user} ({flags(user)}) in {ns}"
            assert hot_queries.namespace_and_membership("no-such-namespace", user) == (None, False)
        for ns in namespaces:
            assert hot_queries.namespace_and_membership(ns.name, None) == (ns, False)
        transaction.set_rollback(True)
