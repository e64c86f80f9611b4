"""The usage page (/usage/): GPU-hours per day as a chart, a table grouped as asked, filters
and the same table as CSV. Members see their namespaces, staff all."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from jobdash.jobs.exceptions import InvalidInput

from . import query, selectors
from .charts import day_chart


@login_required
def usage_page(request):
    now = timezone.now()
    try:
        asked = query.parse(request.GET, now)
    except InvalidInput as error:
        context = {"error": error, "groups": selectors.GROUPS, "params": request.GET}
        return render(request, "usage/usage.html", context, status=400)
    namespaces = query.visible(request.user)
    rows = selectors.usage(asked.from_day, asked.to_day, asked.group_by, namespaces, now)
    if request.GET.get("format") == "csv":
        response = HttpResponse(query.as_csv(asked.group_by, rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="usage-{asked.from_day}-{asked.to_day}.csv"'
        return response
    per_day = selectors.usage(asked.from_day, asked.to_day, ["day"], namespaces, now)
    chart = day_chart(asked.from_day, asked.to_day, {row["day"]: row["gpu_hours"] for row in per_day})
    csv_params = request.GET.copy()
    csv_params["format"] = "csv"
    context = {
        "asked": asked,
        "rows": [{"groups": [str(row[g]) for g in asked.group_by], **row} for row in rows],
        "chart": chart,
        "groups": selectors.GROUPS,
        "csv_query": csv_params.urlencode(),
        "totals": {c: sum(row[c] for row in rows) for c in query.COLUMNS},
    }
    return render(request, "usage/usage.html", context)
