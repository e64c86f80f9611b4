"""Hand-written SQL for the hot paths of submission and the admission webhook.

Each query is one round trip where the ORM would make several, or compile its query for
longer than the database takes to run it (bench/results/dispatcher.md, issue #18).
The SQL is built from the models' metadata, once per process, so renamed columns follow.
The rules stay the ORM's: membership as `selectors.is_member`, the values `Model.save`
would write, rows loaded with `Model.from_db`.
"""

from django.contrib.auth import get_user_model
from django.db import connection, models

from . import selectors
from .models import ACTIVE_STATES, Job, JobEvent, Namespace

_namespace_sql: dict[bool, str] = {}


def _namespace_query(membership: bool) -> str:
    """The namespace's columns, then whether the user (parameters 1 and 2) is a member; the
    membership probes only when asked for (else FALSE)."""
    if membership not in _namespace_sql:
        qn = connection.ops.quote_name
        meta = Namespace._meta
        members = Namespace.members.through._meta
        groups = Namespace.groups.through._meta
        user_groups = get_user_model().groups.through._meta
        columns = ", ".join(f"n.{qn(_column(Namespace, f.name))}" for f in meta.concrete_fields)
        pk = f"n.{qn(_column(Namespace, meta.pk.name))}"
        member = (
            f"EXISTS (SELECT 1 FROM {qn(members.db_table)} m WHERE m.{qn(_column(members.model, 'namespace'))} = "
            f"{pk} AND m.{qn(_column(members.model, 'user'))} = %s) "
            f"OR EXISTS (SELECT 1 FROM {qn(groups.db_table)} g JOIN {qn(user_groups.db_table)} ug "
            f"ON ug.{qn(_column(user_groups.model, 'group'))} = g.{qn(_column(groups.model, 'group'))} "
            f"WHERE g.{qn(_column(groups.model, 'namespace'))} = {pk} "
            f"AND ug.{qn(_column(user_groups.model, 'user'))} = %s)"
            if membership
            else "FALSE"
        )
        _namespace_sql[membership] = (
            f"SELECT {columns}, {member} FROM {qn(meta.db_table)} n WHERE n.{qn(_column(Namespace, 'name'))} = %s"
        )
    return _namespace_sql[membership]


def namespace_and_membership(name: str, user) -> tuple[Namespace | None, bool]:
    """The namespace named `name` (None if jobdash has none) and whether `user` is one of its
    members, directly or through a group, or staff (selectors.is_member's rule; False for
    no user), in one query: a submission's hot path, where the ORM's query compilation
    costs more than the query."""
    can_be_member = user is not None and user.is_authenticated and user.is_active
    # Staff are members of every namespace (sees_all_namespaces): nothing to probe.
    sees_all = can_be_member and selectors.sees_all_namespaces(user)
    user_id = user.pk if can_be_member and not sees_all else None
    with connection.cursor() as cursor:
        if user_id is None:
            cursor.execute(_namespace_query(False), [name])
        else:
            cursor.execute(_namespace_query(True), [user_id, user_id, name])
        row = cursor.fetchone()
    if row is None:
        return None, False
    fields = Namespace._meta.concrete_fields
    values = [
        field.from_db_value(value, None, connection) if hasattr(field, "from_db_value") else value
        for field, value in zip(fields, row, strict=False)
    ]
    ns = Namespace.from_db(connection.alias, [f.attname for f in fields], values)
    return ns, bool(sees_all or (can_be_member and row[-1]))


_JOB_INSERT_FIELDS = tuple(f for f in Job._meta.concrete_fields if not f.primary_key)
_submit_sql: str | None = None


def _submit_query() -> str:
    global _submit_sql
    if _submit_sql is None:
        qn = connection.ops.quote_name
        job, event = Job._meta, JobEvent._meta
        pk = qn(_column(Job, job.pk.name))
        columns = ", ".join(qn(_column(Job, f.name)) for f in _JOB_INSERT_FIELDS)
        values = ", ".join(["%s"] * len(_JOB_INSERT_FIELDS))
        event_columns = ", ".join(qn(_column(JobEvent, f)) for f in ("job", "type", "message", "actor", "created_at"))
        _submit_sql = (
            f"WITH j AS (INSERT INTO {qn(job.db_table)} ({columns}) VALUES ({values}) RETURNING {pk}), "
            f"e AS (INSERT INTO {qn(event.db_table)} ({event_columns}) SELECT {pk}, %s, %s, %s, %s FROM j) "
            f"SELECT {pk} FROM j"
        )
    return _submit_sql


def insert_submitted(job: Job, note: str, actor: str) -> None:
    """PostgreSQL: insert `job` and its Submitted event in one statement (one round trip,
    atomic on its own), with the values Model.save would write."""
    values = [f.get_db_prep_save(f.pre_save(job, True), connection) for f in _JOB_INSERT_FIELDS]
    created_at = _concrete(JobEvent, "created_at").get_db_prep_save(job.submitted_at, connection)
    import psycopg  # (PostgreSQL only)

    connection.ensure_connection()
    # Server-side binding, prepared: the manifest and its JSON travel as parameters instead of
    # being quoted into the text (Django's cursors bind client-side), and the statement is
    # parsed and planned once per connection rather than once per job.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(_submit_query(), [*values, "Submitted", note, actor, created_at], prepare=True)
        row = cursor.fetchone()
    assert row is not None
    job.pk = row[0]
    job._state.adding = False
    job._state.db = connection.alias


# What a caller answering a retry needs (the rest of the row is loaded only if read), in
# the model's field order, as Model.from_db wants them.
_FOUND_FIELDS = tuple(
    f.name
    for f in Job._meta.concrete_fields
    if f.name in {"id", "namespace", "state", "source", "submitted_by_name", "position", "message", "parsed"}
)
_lookup_sql: str | None = None


def _concrete(model: type[models.Model], name: str) -> models.Field:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field), f"{model.__name__}.{name} is a relation's reverse side"
    return field


def _column(model: type[models.Model], name: str) -> str:
    column = _concrete(model, name).column
    assert column is not None, f"{model.__name__}.{name} has no column"
    return column


def _lookup_query() -> str:
    global _lookup_sql
    if _lookup_sql is None:
        job, namespace = Job._meta, Namespace._meta
        columns = ", ".join(f"j.{_column(Job, name)}" for name in _FOUND_FIELDS)
        states = ", ".join(["%s"] * len(ACTIVE_STATES))
        _lookup_sql = (
            f"SELECT n.{namespace.pk.column}, n.{namespace.get_field('name').column}, {columns} "
            f"FROM {namespace.db_table} n LEFT JOIN {job.db_table} j "
            f"ON j.{job.get_field('namespace').column} = n.{namespace.pk.column} "
            f"AND j.{job.get_field('name').column} = %s AND j.{job.get_field('state').column} IN ({states}) "
            f"WHERE n.{namespace.get_field('name').column} = %s LIMIT 1"
        )
    return _lookup_sql


def lookup(namespace: str, name: str) -> tuple[Namespace | None, Job | None]:
    """The namespace and its active job of that name, in one indexed query (the namespace
    by its unique name, the job by the partial unique index of active (namespace, name)
    pairs). Written out in SQL: on the webhook's hot path the ORM's query compilation
    costs more than the query. Job fields outside _FOUND_FIELDS are loaded if read."""
    with connection.cursor() as cursor:
        cursor.execute(_lookup_query(), [name, *ACTIVE_STATES, namespace])
        row = cursor.fetchone()
    if row is None:
        return None, None
    ns = Namespace.from_db(connection.alias, ["id", "name"], list(row[:2]))
    if row[2] is None:
        return ns, None
    values = list(row[2:])
    parsed = _FOUND_FIELDS.index("parsed")
    # from_db_value ignores its expression argument; raw rows have none.
    values[parsed] = Job._meta.get_field("parsed").from_db_value(values[parsed], None, connection)  # type: ignore[arg-type]
    job = Job.from_db(connection.alias, [_concrete(Job, f).attname for f in _FOUND_FIELDS], values)
    job.namespace = ns
    return ns, job
