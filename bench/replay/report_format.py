"""What every part of the trace replay's report shares: the order policies and quota modes
are shown in, the default policy the targets are about, the runtime target, and how
seconds, durations and a run's pace read in a table.
"""

from __future__ import annotations

from typing import Any

from .records import BORROW, ELASTIC, FIXED

ORDER = ("none", "seed", "fifo", "fifo-besteffort", "priority", "fair", "shortest", "sjf-oracle")
DEFAULT = "priority"
TARGET_RUNTIME_S = 600.0
QUOTA_ORDER = (FIXED, BORROW, ELASTIC)


def whole_seconds(value: float) -> str:
    return f"{value:,.0f}"


def duration(seconds: float) -> str:
    """Seconds as a short duration: 45 s, 12 min, 3.4 h, 5.1 d."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def pace(summary: dict[str, Any]) -> str:
    factor = summary.get("compress", 1)
    return "shared window" if factor == 1 else f"arrivals x{factor:g}"
