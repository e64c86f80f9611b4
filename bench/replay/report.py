"""bench/results/trace_replay.md (its generated sections) and the PNG plots, from replay summaries.

The report is part generated, part written: everything between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` is rewritten from the
summaries; the prose around it is kept as it is. This module edits those sections; the
parts are written by report_tables (the main tables), report_plots (the PNGs),
report_elastic (elastic quota, issue #15) and report_ranges (start-time ranges, issue
#16), with what they share in report_format.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from .records import FIXED
from .report_elastic import ELASTIC_HEADING, elastic_runs, elastic_table, elastic_targets
from .report_format import ORDER
from .report_placement import (
    PLACEMENT_HEADING,
    placement_cost,
    placement_plot,
    placement_runs,
    placement_table,
    placement_targets,
)
from .report_plots import plots
from .report_ranges import RANGES_HEADING, bands_table, range_runs, ranges_table, ranges_targets
from .report_tables import (
    cost_table,
    eta_table,
    helios_table,
    results_table,
    size_table,
    targets_table,
    vc_table,
)
from .report_tide import TIDE_HEADING, lent_share, tide_runs, tide_table

REPORT = "trace_replay.md"


def _rank(summary: dict[str, Any]) -> tuple:
    label = summary["label"]
    base = summary["policy"]
    return (ORDER.index(base) if base in ORDER else len(ORDER), label != base, label)


SKELETON = """# Trace replay: two months of Philly through jobdash

<!-- generated:results -->
<!-- /generated:results -->
"""


def _replace(text: str, name: str, body: str) -> str:
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    block = f"{start}\n{body}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def _insert_after(text: str, after: str, name: str, body: str) -> str:
    """``_replace``, but a new block goes right after block ``after`` (if there is one)."""
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    anchor = f"<!-- /generated:{after} -->"
    if start in text or anchor not in text:
        return _replace(text, name, body)
    return text.replace(anchor, f"{anchor}\n\n{start}\n{body}\n{end}", 1)


def _shown_labels(text: str, name: str = "results", column: int = 1) -> set[str]:
    """The runs a generated table shows now (the results table: its first column; the
    elastic and ranges tables: their second), footnote marks taken off."""
    match = re.search(rf"<!-- generated:{name} -->(.*?)<!-- /generated:{name} -->", text, re.S)
    if not match:
        return set()
    rows = [line for line in match.group(1).splitlines() if line.startswith("| ")]
    return {re.sub(r" \[\d+\]$", "", row.split("|")[column].strip()) for row in rows[1:]}


def _keeps(text: str, name: str, runs: list[dict[str, Any]]) -> bool:
    """Whether a generated table is kept as it is: it shows a run the summaries lack."""
    missing = _shown_labels(text, name, 2) - {s["label"] for s in runs}
    if missing:
        print(f"# the {name} tables are kept as they are: no summary for {', '.join(sorted(missing))}", file=sys.stderr)
    return bool(missing)


def is_base(summary: dict[str, Any]) -> bool:
    """A run of the main tables: fixed quotas, the trace's own arrival times."""
    return summary.get("quota", FIXED) == FIXED and summary.get("compress", 1) == 1


def write_report(summaries: list[dict[str, Any]], out: Path) -> list[Path]:
    """Rewrite the generated sections.  The main ones (fixed quotas, the trace's own pace)
    are rewritten only if the summaries cover every run they show now, so a report over a
    partial cache (another machine, a few runs) keeps the numbers it had; the sections on
    elastic quota and start ranges likewise, and only if there are summaries for them. The
    section on pinned placement (issue #31) shows every run made since. Runs with lent nodes
    are shown only in their own section (``write_tide``)."""
    summaries = sorted((s for s in summaries if not lent_share(s)), key=_rank)
    later = placement_runs(summaries)
    base = [s for s in summaries if is_base(s)]
    main = [s for s in base if s["label"] == s["policy"]]
    by_label = {s["label"]: s for s in main}
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT
    text = path.read_text() if path.exists() else SKELETON
    written = [path]
    missing = _shown_labels(text) - {s["label"] for s in base}
    if base and not missing:
        sections = {
            "results": results_table(base),
            "helios": helios_table(),
            "targets": targets_table(by_label),
            "sizes": size_table(base),
            "vcs": vc_table(main),
            "eta": eta_table(base),
            "cost": cost_table(base),
        }
        for name, body in sections.items():
            text = _replace(text, name, body)
        written += plots(main, out)
    elif missing:
        print(f"# the main tables are kept as they are: no summary for {', '.join(sorted(missing))}", file=sys.stderr)
    runs = elastic_runs(summaries)
    if any(not is_base(s) for s in runs) and not _keeps(text, "elastic", runs):
        if "<!-- generated:elastic -->" not in text:
            text = text.rstrip() + "\n\n" + ELASTIC_HEADING
        text = _replace(text, "elastic", elastic_table(runs))
        text = _replace(text, "elastic-vcs", vc_table(runs))
        text = _insert_after(text, "targets", "targets-elastic", elastic_targets(runs))
    ranged = range_runs(summaries)
    if ranged and not _keeps(text, "ranges", ranged):
        if "<!-- generated:ranges -->" not in text:
            text = text.rstrip() + "\n\n" + RANGES_HEADING
        text = _replace(text, "ranges", ranges_table(ranged))
        text = _replace(text, "ranges-bands", bands_table(ranged))
        text = _replace(text, "targets-ranges", ranges_targets(ranged))
    if later:
        if "<!-- generated:placement -->" not in text:
            text = text.rstrip() + "\n\n" + PLACEMENT_HEADING
        text = _replace(text, "placement", placement_table(later))
        text = _replace(text, "targets-placement", placement_targets(later))
        text = _replace(text, "placement-cost", placement_cost(later))
        figure = placement_plot(later, out)
        written += [figure] if figure is not None else []
    path.write_text(text)
    return written


def write_tide(summaries: list[dict[str, Any]], out: Path) -> Path | None:
    """Rewrite the section on nodes lent for the night (issue 35) from the summaries of every
    window (``summaries``), alone; None if none of them has lent nodes."""
    runs = tide_runs(summaries)
    if not runs:
        return None
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT
    text = path.read_text() if path.exists() else SKELETON
    if "<!-- generated:tide -->" not in text:
        text = text.rstrip() + "\n\n" + TIDE_HEADING
    path.write_text(_replace(text, "tide", tide_table(runs)))
    return path
