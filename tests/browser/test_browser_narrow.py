"""The pages on a phone (390 px wide) in a real browser: the page itself never scrolls
sideways (a wide table scrolls in its own box), the navigation is all on screen, a job's
name is never broken at its hyphens, the submit page's quota table stays in its box; and
on every page one way of writing a time, no "a.m.", no "(none election)". Issue 45: a
job's key cells (name, state, why it waits) are on screen without scrolling sideways, the
chart's labels are of a size to read, a workflow's graph scrolls in its box; and at any
width the quota's long resource names are whole, on one line."""

import re
from itertools import pairwise
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from jobdash.jobs import services, workflows
from jobdash.jobs.models import Namespace
from tests.browser.test_browser_flow import CLUSTER, blocker, dispatching, page  # noqa: F401 (fixtures)
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
# The quota's keys as a cluster with shared GPUs has them: long, with dots, slashes and hyphens.
LONG_KEYS = {"requests.nvidia.com/gpu.shared": "8", "requests.aliyun.com/gpu-mem": "16276"}
NARROW_CLUSTER = {
    **CLUSTER,
    "nodes": [{**CLUSTER["nodes"][0], "prefix": "gpu-rack1-node"}],  # (node names with hyphens)
    "namespaces": [{"name": "team-a", "quota": {**CLUSTER["namespaces"][0]["quota"], **LONG_KEYS}}],
}
# Each quota key: its lines, and whether its cell holds it and it keeps off its bar.
KEYS = """() => [...document.querySelectorAll('#quota-bars li')].map(li => {
  const code = li.querySelector('.bar-label code'), box = code.getBoundingClientRect();
  const cell = li.querySelector('.bar-label').getBoundingClientRect(), bar = li.querySelector('.bar').getBoundingClientRect();
  return {key: code.textContent, lines: code.getClientRects().length, held: box.right <= cell.right + 0.5,
          apart: box.right <= bar.left + 0.5 || box.bottom <= bar.top + 0.5};
})"""
TICKS = """() => { const svg = document.querySelector('.chart svg').getBoundingClientRect();
  return [...document.querySelectorAll('.chart .tick')].map(t => { const r = t.getBoundingClientRect();
    return {text: t.textContent, height: r.height, left: r.left, right: r.right, top: Math.round(r.top),
            inside: r.left >= svg.left - 0.5 && r.right <= svg.right + 0.5 && r.top >= svg.top - 0.5 && r.bottom <= svg.bottom + 0.5}; }); }"""
# A job table's key cells, row by row: on screen (no sideways scroll needed to read them)?
KEY_CELLS = """table => [...document.querySelectorAll(table + ' tbody tr')].map(tr =>
  [...tr.querySelectorAll('td')].filter(td => td.querySelector('.job-name, .state') || td.classList.contains('reason'))
    .map(td => { const r = td.getBoundingClientRect(); return {text: td.innerText.slice(0, 30), on: r.width > 0 && r.left >= 0 && r.right <= window.innerWidth + 0.5}; }))"""
GRAPH = """() => { const s = document.querySelector('.graph-scroll'); const before = s.scrollLeft; s.scrollLeft = 10000;
  return {wider: s.scrollWidth > s.clientWidth, scrolled: s.scrollLeft > before, overflow: getComputedStyle(s).overflowX,
          right: s.getBoundingClientRect().right}; }"""
# The submit check's quota table: its cells outside the panel, how far the table and the panel scroll sideways, its keys.
QUOTA_TABLE = """() => { const panel = document.querySelector('#check'), box = panel.getBoundingClientRect();
  const table = panel.querySelector('table');
  const shown = [...table.querySelectorAll('td, th')].filter(c => getComputedStyle(c.closest('thead, tbody')).position !== 'absolute');
  const out = shown.filter(c => { const r = c.getBoundingClientRect(); return r.left < box.left - 0.5 || r.right > box.right + 0.5; })
    .map(c => `${c.textContent.trim()} ${Math.round(c.getBoundingClientRect().right)} > ${Math.round(box.right)}`);
  return {out, table: table.scrollWidth - table.clientWidth, panel: panel.scrollWidth - panel.clientWidth,
          keys: [...table.querySelectorAll('td.key')].map(k => k.textContent.trim())}; }"""
PIPELINE = Path(__file__).resolve().parents[2] / "examples" / "workflows" / "pipeline.yaml"


@pytest.fixture
def stack(transactional_db, live_server):
    with dispatching(NARROW_CLUSTER):
        yield live_server


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
    page.locator("#running-table").wait_for()
    for table in ("#queue-table", "#running-table"):
        rows = page.evaluate(KEY_CELLS, table)
        assert rows and all(len(row) >= 2 and all(cell["on"] for cell in row) for row in rows), (table, rows)
    quota_keys_whole(page)
    readable_ticks(page)

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
    one_line(page, "#nodes .node-name")
    check_narrow(page, f"{url}/account/token/")

    stream = services.yaml_documents(PIPELINE.read_bytes())
    name, _ = workflows.header(stream[0])
    pipeline, _ = workflows.workflow_submit(
        user=root, name=name, submissions=[services.Submission(t) for t in stream[1:]], source="api", first_document=1
    )
    check_narrow(page, f"{url}/workflows/{pipeline.pk}/")
    graph = page.evaluate(GRAPH)
    assert graph["wider"] and graph["scrolled"] and graph["overflow"] == "auto", graph
    assert graph["right"] <= PHONE["width"], graph

    page.goto(f"{url}/submit/?example=notebook-gpushare")  # a long key it asks of: requests.aliyun.com/gpu-mem
    quota_table_in_its_box(page, "requests.aliyun.com/gpu-mem")
    for width in (1280, 1366):  # beside the editor, in a narrower column
        page.set_viewport_size({"width": width, "height": 900})
        for example in ("mnist-cpu", "notebook-gpushare"):
            page.goto(f"{url}/submit/?example={example}")
            quota_table_in_its_box(page)
    page.goto(f"{url}/ns/team-a/")
    quota_keys_whole(page)


def quota_keys_whole(tab) -> None:
    keys = tab.evaluate(KEYS)
    assert set(LONG_KEYS) <= {k["key"] for k in keys}, keys
    assert all(k["lines"] == 1 and k["held"] and k["apart"] for k in keys), keys


def readable_ticks(tab) -> None:
    """The chart's labels at least 12 px high, inside the chart, the time labels apart."""
    ticks = tab.evaluate(TICKS)
    assert ticks and all(t["height"] >= 12 and t["inside"] for t in ticks), ticks
    bottom = max(t["top"] for t in ticks)
    times = sorted((t for t in ticks if t["top"] == bottom), key=lambda t: t["left"])
    assert len(times) >= 3 and all(a["right"] < b["left"] for a, b in pairwise(times)), times


def quota_table_in_its_box(tab, key: str = "") -> None:
    """The check's quota table inside its panel with nothing hidden to scroll to: every cell
    (and the header's, when shown) within the panel, neither the table nor the panel wider
    than it shows; its rows only the keys the job asks of (`key` among them, whole)."""
    tab.locator("#check table").wait_for()
    fit = tab.evaluate(QUOTA_TABLE)
    assert fit["out"] == [] and fit["table"] <= 1 and fit["panel"] <= 1, fit
    assert "requests.nvidia.com/gpu.shared" not in fit["keys"], fit  # (in the quota, asked by neither example)
    assert not key or key in fit["keys"], fit
