"""Template filters for the pages; what they render is decided in presenters.py."""

from django import template

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
