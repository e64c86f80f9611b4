"""Server-rendered SVG geometry for the queue history chart: no JavaScript library, the
template draws the shapes computed here."""

from django.utils import timezone

from .dashboard import History

WIDTH, HEIGHT = 720, 180
# Room around the plot for the tick labels at the size a phone draws them (jobdash.css: 24
# units, the chart being scaled to about half): five digits on the left, half an "HH:MM"
# beyond the last tick, a line of them below.
LEFT, RIGHT, TOP, BOTTOM = 64, 40, 16, 36


def _nice_max(value: int) -> int:
    """The y-axis top: the smallest of 1, 2, 5 × 10^n at or above the data (at least 4)."""
    value = max(value, 4)
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale >= value:
                return m * scale
        scale *= 10


def queue_chart(history: History) -> dict:
    n = len(history.queued)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = _nice_max(max(history.queued + history.admitted, default=0))
    slot = plot_w / max(n, 1)

    def y(value: int) -> float:
        return round(TOP + plot_h - plot_h * value / top, 1)

    line = " ".join(f"{round(LEFT + slot * (i + 1), 1)},{y(v)}" for i, v in enumerate(history.queued))
    bars = [
        {
            "x": round(LEFT + slot * i + slot * 0.2, 1),
            "y": y(v),
            "w": round(slot * 0.6, 1),
            "h": round(TOP + plot_h - y(v), 1),
            "value": v,
        }
        for i, v in enumerate(history.admitted)
    ]
    ticks = [{"y": y(v), "label": v} for v in (0, top // 2, top)]
    labels = []
    for i in range(0, n + 1, max(1, n // 6)):
        moment = timezone.localtime(history.start + history.step * i)
        labels.append({"x": round(LEFT + slot * i, 1), "label": moment.strftime("%H:%M")})
    rows = [
        {"end": history.start + history.step * (i + 1), "queued": q, "admitted": a}
        for i, (q, a) in enumerate(zip(history.queued, history.admitted, strict=False))
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": TOP + plot_h,
        "line": line,
        "bars": bars,
        "ticks": ticks,
        "labels": labels,
        "peak_queued": max(history.queued, default=0),
        "admitted_total": sum(history.admitted),
        "hours": round(history.step.total_seconds() * n / 3600),
        "rows": rows,
        "step_minutes": round(history.step.total_seconds() / 60),
    }
