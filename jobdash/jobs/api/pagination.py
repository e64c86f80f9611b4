"""Pages of a list: `?page=` and a `?page_size=` the client may set, within a bound."""

from django.conf import settings
from rest_framework.pagination import PageNumberPagination

from ..exceptions import FieldProblem, InvalidInput

MAX_PAGE_SIZE = 500


class Pages(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def get_page_size(self, request):
        # DRF falls back to the default on a bad value; a client asking for 10 000 rows or
        # for "ten" must hear that it did not get what it asked for.
        text = request.query_params.get(self.page_size_query_param)
        if text is None:
            return settings.REST_FRAMEWORK["PAGE_SIZE"]
        if not text.isdigit() or not 1 <= int(text) <= self.max_page_size:
            raise InvalidInput(
                [FieldProblem("page_size", f"a whole number from 1 to {self.max_page_size}, not {text!r}")]
            )
        return int(text)
