"""Template filters for the pages; what they render is decided in presenters.py."""

import re

from django import template
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from .. import presenters

register = template.Library()


@register.filter(is_safe=True)
def job_links(text: str):
    """Job ids named in an event or a reason ("to make room for job 12", "job(s) 3, 4") as links."""
    return presenters.link_job_ids(text)


@register.filter
def moment(value):
    """A time as every page writes it: presenters.moment."""
    return presenters.moment(value)


@register.filter
def breakable(key: str):
    """A quota key that may break after its dots and slashes where it must
    ("requests.nvidia.com/<wbr>mig-3g.20gb"), never inside a part nor at its hyphens: each
    part in a span that does not wrap."""
    parts = re.split(r"(?<=[./])", key)
    return format_html_join(mark_safe("<wbr>"), '<span class="nobr">{}</span>', ((part,) for part in parts if part))
