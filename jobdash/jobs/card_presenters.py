"""The cluster page's shared GPUs (issue 34): each card drawn as a bar of its memory with one
segment per pod, and MIG slices and time-sliced replicas in words. Reads card_selectors' rows."""

from .card_selectors import MIG_PREFIX, MODEL_NAMES

BAR_WIDTH = 600  # the SVG's viewBox units; it scales to the page's width
BAR_HEIGHT = 18


def mib(amount: int) -> str:
    """GPU memory as the device plugins count it: "12,207 MiB"."""
    return f"{amount:,} MiB"


def model_name(model: str) -> str:
    return MODEL_NAMES.get(model, model)


def card_label(indexes: list[int]) -> str:
    """ "GPU 1", "GPUs 0, 2": the cards a pod got, by index on its node."""
    return f"GPU{'s' if len(indexes) > 1 else ''} {', '.join(str(i) for i in indexes)}" if indexes else ""


def card_bar(card: dict) -> dict:
    """One card: its pods' segments left to right (x, w in viewBox units), then what is taken
    by pods it does not list (charged where binpack would put them, or planned), then free."""
    scale = max(card["memory"], card["used"])
    segments, offset = [], 0
    for number, pod in enumerate(card["pods"]):
        job = f", job {pod['job']}" if pod["job"] else ""
        state = "" if pod["bound"] else ", on its way (not started)"
        segments.append(
            {
                "x": round(BAR_WIDTH * offset / scale, 1),
                "w": round(BAR_WIDTH * pod["memory"] / scale, 1),
                "title": f"{pod['pod']}{job}: {mib(pod['memory'])}{state}",
                "class": f"card-pod card-pod-{number % 4}" + ("" if pod["bound"] else " card-waiting"),
            }
        )
        offset += pod["memory"]
    if card["used"] > offset:
        segments.append(
            {
                "x": round(BAR_WIDTH * offset / scale, 1),
                "w": round(BAR_WIDTH * (card["used"] - offset) / scale, 1),
                "title": f"{mib(card['used'] - offset)} promised to pods on their way",
                "class": "card-pod card-waiting",
            }
        )
        offset = card["used"]
    return {
        "label": card_label([card["index"]]),
        "id": card["id"],
        "segments": segments,
        "free_x": round(BAR_WIDTH * min(offset, scale) / scale, 1),
        "free_w": round(BAR_WIDTH * card["free"] / scale, 1),
        "memory": mib(card["memory"]),
        "used": mib(card["used"]),
        "free": mib(card["free"]),
        "over": card["used"] > card["memory"],
        "pods": len(card["pods"]),
    }


def slice_label(row: dict) -> str:
    """ "MIG 1g.5gb: 3 free / 7", "time-sliced: 5 free / 8"."""
    name = f"MIG {row['resource'][len(MIG_PREFIX) :]}" if row["kind"] == "MIG" else "time-sliced"
    return f"{name}: {row['free']} free / {row['allocatable']}"


def shared_nodes(nodes: list[dict]) -> list[dict]:
    """The nodes that share their GPUs, for the page's "Shared GPUs" section."""
    shown = []
    for node in nodes:
        if not node["cards"] and not node["slices"]:
            continue
        shown.append(
            {
                "name": node["name"],
                "model": model_name(node["sharing"]) if node["cards"] else "",
                "cards": [card_bar(card) for card in node["cards"]],
                "slices": [slice_label(row) for row in node["slices"]],
                "replicas": node["replicas"],
            }
        )
    return shown
