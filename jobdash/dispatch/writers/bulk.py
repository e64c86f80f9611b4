"""Set-based writes for the dispatcher's hot paths.

A cycle writes the same few columns of many Job rows: statuses of every queued job,
the claim of every admission, the uid of every created object, the tracker's transitions.
Django's `bulk_update` builds a `CASE WHEN id = ... THEN ...` expression per row and
`pk__in` a parameter per id, and with client-side binding psycopg then quotes each of
them into the query text in Python: with hundreds of rows that costs more than the
statement. These helpers send the rows as one JSON document (`jsonb_to_recordset`) and
ids as one array literal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from django.db import connection, models
from django.db.models import Field, Q
from django.db.models.expressions import RawSQL

_RECORD_TYPES = {
    "AutoField": "bigint",
    "BigAutoField": "bigint",
    "IntegerField": "bigint",
    "BigIntegerField": "bigint",
    "PositiveIntegerField": "bigint",
    "PositiveSmallIntegerField": "bigint",
    "SmallIntegerField": "bigint",
    "CharField": "text",
    "TextField": "text",
    "DateTimeField": "timestamptz",
    "FloatField": "float8",
    "BooleanField": "boolean",
    "JSONField": "jsonb",
}


def _field(model: type[models.Model], name: str) -> Field:
    """A field of `model` stored in a column of its table (get_field also finds reverse
    relations, which have none)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.column:
        raise TypeError(f"bulk: {model.__name__}.{name} is not a column")
    return field


def _column(model: type[models.Model], name: str) -> str:
    """The quoted column of a field; "pk" is the primary key's."""
    field = model._meta.pk if name == "pk" else _field(model, name)
    if field is None or not field.column:
        raise TypeError(f"bulk: {model.__name__}.{name} is not a column")
    return connection.ops.quote_name(field.column)


def _record_type(field: Field) -> str:
    kind = field.get_internal_type()
    if kind not in _RECORD_TYPES:
        raise TypeError(f"bulk: no record type for {field.name} ({kind})")
    return _RECORD_TYPES[kind]


def _json_default(value):
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("bulk: naive datetime")  # USE_TZ: every datetime here is aware
        return value.isoformat()
    raise TypeError(f"bulk: cannot send {type(value).__name__}")


def _constants(model: type[models.Model], constants: Mapping[str, object]) -> tuple[list[str], list]:
    sql, params = [], []
    for name, value in constants.items():
        sql.append(f"{_column(model, name)} = %s")
        params.append(_field(model, name).get_db_prep_save(value, connection))
    return sql, params


def _id_array(ids: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers, for `= ANY(%s::bigint[])`."""
    return "{" + ",".join(str(int(i)) for i in ids) + "}"


def pk_among(ids: Iterable[int]) -> Q:
    """`Q(pk__in=ids)` as one array parameter: an IN list of thousands (every job object the
    watch cache holds) costs more to build and bind than to run."""
    return Q(pk__in=RawSQL("SELECT unnest(%s::bigint[])", [_id_array(ids)]))


def _state_filter(model, only_states: Sequence[str] | None) -> tuple[str, list]:
    if only_states is None:
        return "", []
    return f" AND t.{_column(model, 'state')} = ANY(%s)", [[str(s) for s in only_states]]


def row_version(alias: str) -> str:
    """SQL for a row's version: PostgreSQL's xmin and ctid of the row as it is now (every
    update of a row makes a new version of it, in a new place)."""
    return f"{alias}.xmin::text || ' ' || {alias}.ctid::text"


def update_rows(
    model: type[models.Model],
    rows: Iterable[Sequence],
    fields: Sequence[str] = (),
    *,
    constants: Mapping[str, object] | None = None,
    only_states: Sequence[str] | None = None,
) -> int:
    """For each row `(pk, value, ...)` (values in `fields` order): set those fields of that
    object, and every field in `constants` to its value; only where `state` is in
    `only_states` when given. One statement. Returns the number of rows updated."""
    rows = list(rows)
    constants = dict(constants or {})
    if not rows:
        return 0
    sql, params = _update_sql(model, rows, fields, constants, only_states, versioned=False)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def update_versioned_rows(
    model: type[models.Model],
    rows: Iterable[Sequence],
    fields: Sequence[str],
    *,
    only_states: Sequence[str] | None = None,
) -> dict[int, str]:
    """update_rows for rows `(pk, version, value, ...)`: each is updated only if it is still
    at that version (row_version: nobody else wrote it since it was read). Returns the
    updated rows' new versions by pk, so that their reader need not read them back."""
    rows = list(rows)
    if not rows:
        return {}
    sql, params = _update_sql(model, rows, fields, {}, only_states, versioned=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return dict(cursor.fetchall())


def _update_sql(model, rows, fields, constants, only_states, *, versioned: bool) -> tuple[str, list]:
    meta = model._meta
    q = connection.ops.quote_name
    table, pk = q(meta.db_table), _column(model, "pk")
    constant_sql, constant_params = _constants(model, constants)
    state_sql, state_params = _state_filter(model, only_states)
    if fields:
        field_objs = [_field(model, name) for name in fields]
        names = [f"v{i}" for i in range(len(field_objs))]
        keys = ["pk_", "ver_", *names] if versioned else ["pk_", *names]
        document = json.dumps([dict(zip(keys, row, strict=False)) for row in rows], default=_json_default)
        record = ", ".join(
            ["pk_ bigint"]
            + (["ver_ text"] if versioned else [])
            + [f"{name} {_record_type(f)}" for name, f in zip(names, field_objs, strict=False)]
        )
        sets = [f"{_column(model, f.name)} = v.{name}" for f, name in zip(field_objs, names, strict=False)]
        version_sql = f" AND {row_version('t')} = v.ver_" if versioned else ""
        returning = f" RETURNING t.{pk}, {row_version('t')}" if versioned else ""
        sql = (
            f"UPDATE {table} AS t SET {', '.join(sets + constant_sql)} "
            f"FROM jsonb_to_recordset(%s::jsonb) AS v({record}) WHERE t.{pk} = v.pk_{version_sql}{state_sql}"
            f"{returning}"
        )
        params = [*constant_params, document, *state_params]  # in the order they appear
    else:
        if versioned:
            raise TypeError("bulk: a versioned update needs fields")
        sql = f"UPDATE {table} AS t SET {', '.join(constant_sql)} WHERE t.{pk} = ANY(%s::bigint[]){state_sql}"
        params = [*constant_params, _id_array(row[0] for row in rows), *state_params]
    return sql, params


def lock_in_states(model: type[models.Model], ids: Iterable[int], states: Sequence[str]) -> list[int]:
    """SELECT ... FOR UPDATE of the rows among `ids` whose state is in `states`, in id
    order (so two batches cannot deadlock); returns their ids. Inside a transaction."""
    ids = list(ids)
    if not ids:
        return []
    table, pk = connection.ops.quote_name(model._meta.db_table), _column(model, "pk")
    state = _column(model, "state")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {pk} FROM {table} WHERE {pk} = ANY(%s::bigint[]) AND {state} = ANY(%s) ORDER BY {pk} FOR UPDATE",
            [_id_array(ids), [str(s) for s in states]],
        )
        return [row[0] for row in cursor.fetchall()]


def insert_events(events: Iterable[tuple[int, str, str, str] | tuple[int, str, str, str, str]]) -> int:
    """JobEvent rows (job id, type, message, actor[, cluster]), in the given order, created now:
    what `JobEvent.objects.bulk_create` does, in one statement with one parameter."""
    from django.utils import timezone

    from jobdash.jobs.models import JobEvent

    events = list(events)
    if not events:
        return 0
    now = timezone.now()
    q = connection.ops.quote_name
    meta = JobEvent._meta
    columns = [_column(JobEvent, name) for name in ("job", "type", "message", "actor", "cluster", "created_at")]
    document = json.dumps([[*event, ""][:5] for event in events])
    sql = (
        f"INSERT INTO {q(meta.db_table)} ({', '.join(columns)}) "
        f"SELECT (e.value->>0)::bigint, e.value->>1, e.value->>2, e.value->>3, e.value->>4, %s "
        f"FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(value, n) ORDER BY e.n"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, document])
        return cursor.rowcount


def scales(ids: Iterable[int]) -> dict[int, Mapping[str, int]]:
    """Job id -> its scale (the pods per elastic role it was admitted or resized to), for
    the jobs among `ids` that have one."""
    from jobdash.jobs.models import Job

    rows = Job.objects.filter(pk__in=list(ids), scale__isnull=False).values_list("pk", "scale")
    return {job_id: scale for job_id, scale in rows if scale}


def insert_sized_events(events: Iterable[tuple[int, str, str, str, Mapping[str, int]]]) -> None:
    """JobEvent rows (job id, type, message, actor, scale) of elastic jobs changing size,
    created now: few, so through the ORM."""
    from jobdash.jobs.models import JobEvent

    JobEvent.objects.bulk_create(
        JobEvent(job_id=j, type=t, message=m, actor=a, scale=dict(scale)) for j, t, m, a, scale in events
    )
