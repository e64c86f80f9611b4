"""The pages on a phone (390 px wide) in a real browser: the page itself never scrolls
sideways (a wide table scrolls in its own box), the navigation is all on screen, a job's
name is never broken at its hyphens, the submit page's quota table stays in its box; and
on every page one way of writing a time, no "a.m.", no "(none election)"."""

import re

import pytest
from django.contrib.auth.models import User

from jobdash.jobs import services
from jobdash.jobs.models import Namespace
from tests.browser.test_browser_flow import blocker, page, stack  # noqa: F401 (fixtures)
from tests.jobdash.dispatch_support import manifest

pytestmark = pytest.mark.django_db(transaction=True)
PHONE = {"width": 390, "height": 844}
LONG_NAME = "resnet50-imagenet-bf16-sweep-lr-0003-warmup"
# Django's default datetime ("Nov. 27, 2026, 7:46 a.m.") and any 12-hour clock.
TWELVE_HOUR = re.compile(r"\b[ap]\.m\.|\b\d{1,2}:\d\d ?[AP]M\b")

OVERFLOW = """() => {
  const page = document.documentElement.scrollWidth - window.innerWidth;
  const tables = [...document.querySelectorAll('table')].filter(t => t.scrollWidth > t.clientWidth + 1)
    .filter(t => getComputedStyle(t).overflowX !== 'auto').map(t => t.id || t.className || 'table');
  const wide = page > 0 ? [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
    .filter(e => ![...e.children].some(c => c.getBoundingClientRect().right > window.innerWidth + 1))
    .slice(0, 6).map(e => `${e.tagName}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`) : [];
  return {page, tables, wide};
}"""
NAV = """() => [...document.querySelectorAll('header.top nav a')].map(a => {
  const box = a.getBoundingClientRect();
  return {text: a.textContent, left: box.left, right: box.right, width: box.width, lines: a.getClientRects().length};
})"""
NAME_LINES = "els => els.map(e => ({lines: e.getClientRects().length, height: e.getBoundingClientRect().height}))"


def check_narrow(tab, path: str) -> str:
    tab.goto(path)
    tab.wait_for_load_state("networkidle")
    overflow = tab.evaluate(OVERFLOW)
    assert overflow == {"page": 0, "tables": [], "wide": []}, (path, overflow)
    links = tab.evaluate(NAV)
    assert len(links) == 8, links  # staff: Queues, Submit, Workflows, Usage, API token, API docs, Cluster, Admin
    for link in links:
        assert link["width"] > 0 and link["left"] >= 0 and link["right"] <= PHONE["width"], (path, link)
        assert link["lines"] == 1, (path, link)  # "API token" on one line
    text = tab.inner_text("body")
    assert not TWELVE_HOUR.search(text), (path, TWELVE_HOUR.search(text))
    assert "(document)" not in text and "none election" not in text
    return text


def one_line(tab, selector: str) -> None:
    names = tab.locator(selector)
    assert names.count() > 0, selector
    single = tab.evaluate("s => parseFloat(getComputedStyle(document.querySelector(s)).lineHeight)", selector)
    for box in names.evaluate_all(NAME_LINES):
        assert box["lines"] == 1 and box["height"] <= single * 1.5, (selector, box)


def test_the_pages_at_390_px(page, stack):  # noqa: F811
    url = stack.url
    root = User.objects.create_user("root", password="root-pass-123", is_staff=True, is_superuser=True)
    ns = Namespace.objects.create(name="team-a")
    ns.members.add(root)
    services.job_submit(user=root, manifest=blocker("warmup", 600), source="api")
    long = services.job_submit(user=root, manifest=manifest(LONG_NAME, cpu="2", duration=2), source="api")
    page.set_viewport_size(PHONE)
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("root-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Queues").wait_for()

    check_narrow(page, f"{url}/")
    check_narrow(page, f"{url}/ns/team-a/")
    one_line(page, "#queue-table .job-name")

    text = check_narrow(page, f"{url}/jobs/{long.pk}/")
    one_line(page, "h1 .job-name")
    submitted = re.search(r"Submitted\s+(\S+ \S+)", text)
    assert submitted and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", submitted[1]), text
    # the timeline writes its times the same way
    times = page.locator("#timeline time").all_inner_texts()
    assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", t) for t in times), times

    page.goto(f"{url}/submit/?example=mnist-cpu")
    page.locator("#check-fit").wait_for()
    check_narrow(page, f"{url}/submit/?example=mnist-cpu")
    quota_table_in_its_box(page)

    cluster = check_narrow(page, f"{url}/cluster/")
    assert "no election: JOBDASH_LEADER is none" in cluster
    check_narrow(page, f"{url}/account/token/")
    page.set_viewport_size({"width": 1366, "height": 900})  # beside the editor, in a narrower column
    page.goto(f"{url}/submit/?example=mnist-cpu")
    quota_table_in_its_box(page)


def quota_table_in_its_box(tab) -> None:
    tab.locator("#check table").wait_for()
    box, table = tab.evaluate(
        """() => [document.querySelector('#check'), document.querySelector('#check table')].map(e => {
                   const r = e.getBoundingClientRect(); return [r.left, r.right]; })"""
    )
    assert box[0] <= table[0] and table[1] <= box[1] + 0.5, (box, table)
