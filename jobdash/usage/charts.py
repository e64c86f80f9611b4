"""The usage page's chart: GPU-hours per UTC day as bars, server-rendered SVG geometry (the
template draws it; no JavaScript)."""

from datetime import date, timedelta

WIDTH, HEIGHT = 720, 180
LEFT, RIGHT, TOP, BOTTOM = 48, 10, 10, 28


def _nice_max(value: float) -> float:
    """The y-axis top: the smallest of 1, 2, 5 × 10^n at or above the data (at least 1)."""
    value, scale = max(value, 1.0), 1.0
    while True:
        for m in (1, 2, 5):
            if m * scale >= value:
                return m * scale
        scale *= 10


def day_chart(from_day: date, to_day: date, gpu_hours: dict[date, float]) -> dict:
    days = [from_day + timedelta(days=i) for i in range((to_day - from_day).days + 1)]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = _nice_max(max(gpu_hours.values(), default=0.0))
    slot = plot_w / max(len(days), 1)

    def y(value: float) -> float:
        return round(TOP + plot_h - plot_h * value / top, 1)

    bars = [
        {
            "x": round(LEFT + slot * i + slot * 0.15, 1),
            "y": y(gpu_hours.get(day, 0.0)),
            "w": round(max(slot * 0.7, 0.5), 1),
            "h": round(TOP + plot_h - y(gpu_hours.get(day, 0.0)), 1),
            "day": day,
            "value": round(gpu_hours.get(day, 0.0), 2),
        }
        for i, day in enumerate(days)
    ]
    step = max(1, len(days) // 8)
    labels = [
        {"x": round(LEFT + slot * (i + 0.5), 1), "label": days[i].strftime("%m-%d")} for i in range(0, len(days), step)
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "bottom": TOP + plot_h,
        "bars": bars,
        "ticks": [{"y": y(v), "label": f"{v:g}"} for v in (0, top / 2, top)],
        "labels": labels,
        "total": round(sum(gpu_hours.values()), 2),
    }
