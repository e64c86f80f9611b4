"""GET /api/v1/usage/: GPU-, CPU- and memory-hours over a range of UTC days, grouped as asked;
JSON, or CSV with ?format=csv. Members see their namespaces, staff all."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, renderers
from rest_framework.decorators import api_view, permission_classes, renderer_classes
from rest_framework.response import Response

from . import query, selectors


class CSVRenderer(renderers.BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict) and "rows" in data:
            return query.as_csv(data["group_by"], data["rows"])
        # An error, in the one shape every API error has, as CSV too.
        problems = (data or {}).get("errors", []) if isinstance(data, dict) else []
        return "path,message\n" + "".join(f"{p['path']},{p['message']}\n" for p in problems)


@extend_schema(
    parameters=[
        OpenApiParameter("from", OpenApiTypes.DATE, description="First UTC day (default: the 1st of this month)"),
        OpenApiParameter("to", OpenApiTypes.DATE, description="Last UTC day, included (default: today)"),
        OpenApiParameter("group_by", str, description=f"Comma-separated, any of {', '.join(selectors.GROUPS)}"),
        OpenApiParameter("format", str, enum=["json", "csv"]),
    ],
    responses={200: OpenApiTypes.OBJECT},
)
@api_view(["GET"])
@permission_classes([permissions.IsAuthenticated])
@renderer_classes([renderers.JSONRenderer, renderers.BrowsableAPIRenderer, CSVRenderer])
def usage_view(request):
    asked = query.parse(request.query_params)
    rows = selectors.usage(asked.from_day, asked.to_day, asked.group_by, query.visible(request.user))
    for row in rows:
        if "day" in row:
            row["day"] = row["day"].isoformat()
    return Response({"from": asked.from_day, "to": asked.to_day, "group_by": asked.group_by, "rows": rows})
