"""Shared GPUs shown (issue 34): the cluster page and API draw each shared card with its pods
and count a shared node's whole GPUs truly, the job page names each pod's card, the submit
check says whether a pod's share fits some card now, /metrics exports each card's memory.
The cluster state is written as the dispatcher publishes it (jobdash/dispatch/publish.py)."""

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobdash.jobs import card_presenters, preview, services
from jobdash.jobs.card_selectors import cards_of
from jobdash.jobs.models import ClusterState, Job, State
from jobdash.jobs.presenters import placement_rows

from .conftest import token_client, with_name

pytestmark = pytest.mark.django_db
CARD = 16_276
MIB = 2**20


def pod(name, memory, job="", bound=True):
    return {"pod": name, "job": job, "memory": memory, "bound": bound}


def card(index, memory, used, model="gpushare", pods=(), card_id=None):
    return {
        "index": index,
        "id": card_id or str(index),
        "memory": memory,
        "used": used,
        "model": model,
        "pods": list(pods),
    }


def node(name, allocatable, allocated=None, labels=None, cards=None, **extra):
    row = {
        "name": name,
        "allocatable": {"cpu": 32000, "memory": 128 * 2**30, "pods": 110, **allocatable},
        "allocated": allocated or {},
        "labels": labels or {},
        "unschedulable": False,
        "failed": False,
        "jobs": {},
        **extra,
    }
    if cards is not None:
        row["cards"] = cards
    return row


GPUSHARE = node(
    "share-gpushare-0",
    {"aliyun.com/gpu-mem": 2 * CARD, "aliyun.com/gpu-count": 2},
    {"aliyun.com/gpu-mem": 16_276},
    {"gpushare": "true"},
    cards=[
        card(0, CARD, 12_207, pods=[pod("team-a/nb-0", 8_138, "team-a/nb"), pod("team-b/eval-0", 4_069, bound=False)]),
        card(
            1, CARD, 12_207, pods=[pod("team-a/tiny-0", 4_069, "team-a/tiny"), pod("team-a/nb-1", 8_138, "team-a/nb")]
        ),
    ],
)
# HAMi's nvidia.com/gpu counts vGPUs (10 per card here): 3 taken, on one card of two; its
# cards' memory in all stands in allocatable (cluster/convert.py).
HAMI = node(
    "share-hami-0",
    {"nvidia.com/gpu": 20, "nvidia.com/gpumem": 2 * 32_768},
    {"nvidia.com/gpu": 3},
    {"gpu": "on"},
    cards=[
        card(0, 32_768, 0, "hami", card_id="GPU-aaa"),
        card(1, 32_768, 24_000, "hami", [pod("team-a/inf-0", 8_000, "team-a/inf")] * 3, "GPU-bbb"),
    ],
)
MIG = node(
    "share-mig-0",
    {"nvidia.com/mig-1g.5gb": 7, "nvidia.com/mig-3g.20gb": 1},
    {"nvidia.com/mig-1g.5gb": 2},
    {"nvidia.com/mig.strategy": "mixed"},
)
SLICED = node(
    "share-ts-0",
    {"nvidia.com/gpu.shared": 8},
    {"nvidia.com/gpu.shared": 3},
    {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
)
WHOLE = node("gpu-1", {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 5})
NODES = [GPUSHARE, HAMI, MIG, SLICED, WHOLE]


def publish(nodes=None, pods=None, quotas=None):
    ClusterState.objects.update_or_create(
        id=1,
        defaults={"updated_at": timezone.now(), "quotas": quotas or {}, "nodes": nodes or [], "pods": pods or {}},
    )


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


def test_the_cluster_page_draws_each_shared_card_by_pod(staff_client):
    publish(NODES)
    page = staff_client.get("/cluster/").content.decode()
    shared = page.split('id="shared-gpus"')[1].split("</section>")[0]
    gpushare = shared.split('data-node="share-gpushare-0"')[1].split("</div>")[0]
    assert "shared by memory (gpushare)" in gpushare and "shared by memory (HAMi)" in shared
    # each card: two pods (one on its way) and a free part
    assert "<title>team-a/nb-0, job team-a/nb: 8,138 MiB</title>" in gpushare
    assert "<title>team-b/eval-0: 4,069 MiB, on its way (not started)</title>" in gpushare
    assert gpushare.count('class="card-pod ') == 4 and gpushare.count('class="card-free"') == 2
    assert "12,207 MiB / 16,276 MiB" in gpushare and "<title>4,069 MiB free</title>" in gpushare
    assert 'x="300.0" y="0" width="150.0"' in gpushare  # 4,069 of 16,276 MiB after 8,138: a quarter
    # MIG slices and time-sliced replicas: free / total
    assert "MIG 1g.5gb: 5 free / 7" in shared and "MIG 3g.20gb: 1 free / 1" in shared
    assert "time-sliced: 5 free / 8" in shared and "4 pods share each time-sliced card" in shared
    assert 'data-node="gpu-1"' not in shared  # a whole-GPU node has no card bars
    # the node table: HAMi's 20 vGPUs are 2 cards, 1 of them whole and free
    hami_row = page.split('<span class="node-name">share-hami-0</span>')[1].split("</tr>")[0]
    assert "1 / 2" in hami_row and "2 cards shared by memory (HAMi)" in hami_row


def test_the_cluster_api_has_the_cards_and_counts_whole_gpus_truly(staff):
    publish(NODES)
    data = token_client(staff).get("/api/v1/cluster/").json()
    rows = {row["name"]: row for row in data["nodes"]}
    assert rows["share-hami-0"]["resources"]["gpu"] == {"allocatable": 2, "allocated": 1, "free": 1}
    assert rows["share-gpushare-0"]["resources"]["gpu"] == {"allocatable": 0, "allocated": 0, "free": 0}
    assert rows["share-gpushare-0"]["sharing"] == "gpushare" and rows["gpu-1"]["sharing"] == ""
    first = rows["share-gpushare-0"]["cards"][0]
    assert (first["memory"], first["used"], first["free"]) == (CARD, 12_207, 4_069)
    assert first["pods"][1] == {"pod": "team-b/eval-0", "job": "", "memory": 4_069, "bound": False}
    assert rows["share-hami-0"]["cards"][1]["id"] == "GPU-bbb"
    assert rows["share-mig-0"]["slices"][0] == {
        "resource": "nvidia.com/mig-1g.5gb",
        "kind": "MIG",
        "allocatable": 7,
        "allocated": 2,
        "free": 5,
    }
    assert rows["share-ts-0"]["replicas"] == 4 and rows["share-ts-0"]["slices"][0]["free"] == 5
    # whole GPUs free: gpu-1's 3 and HAMi's one empty card, not its 17 free vGPUs
    assert data["gpu_fit"][0] == {"gpus": 1, "nodes": 2, "pods": 4}
    assert data["gpu_fit"][1] == {"gpus": 2, "nodes": 1, "pods": 1}
    assert data["totals"]["gpu"] == {"allocatable": 10, "allocated": 6, "free": 4}
    assert data["domains"][0]["empty"] == 0  # gpu-1 is partly used, HAMi's card 1 too


@pytest.mark.parametrize(
    "cards",
    [
        "garbage",
        {"0": {"memory": 1}},
        [1, None, "x", {"memory": "lots", "used": 1}, {"memory": True, "used": 0}, {"used": 5}],
        [{"memory": 100, "used": 50, "index": "first", "pods": [None, 7, {"pod": "a/b", "memory": -1}]}],
        [{"memory": 100, "used": 250, "model": 3, "pods": "none"}],
    ],
    ids=["a-string", "a-dict", "no-card", "odd-pods", "over-committed"],
)
def test_an_oddly_shaped_cards_entry_does_not_break_the_page_or_the_api(staff_client, staff, cards):
    publish([node("odd", {"aliyun.com/gpu-mem": 100}, cards=cards), WHOLE])
    assert staff_client.get("/cluster/").status_code == 200
    reply = token_client(staff).get("/api/v1/cluster/")
    assert reply.status_code == 200
    assert [c["memory"] for c in reply.json()["nodes"][1]["cards"]] == [c["memory"] for c in cards_of({"cards": cards})]


def test_odd_cards_are_left_out_and_odd_fields_made_safe():
    assert cards_of({"cards": "garbage"}) == [] and cards_of({}) == []
    [only] = cards_of({"cards": [None, {"memory": 100, "used": 50, "pods": [None, {"pod": "a/b", "memory": 20}]}]})
    assert (only["index"], only["id"], only["free"]) == (1, "1", 50)  # its place in the list
    assert only["pods"] == [{"pod": "a/b", "job": "", "memory": 20, "bound": False}]
    over = card_presenters.card_bar({**only, "used": 250, "free": 0, "pods": []})
    assert over["over"] and over["free_w"] == 0 and over["segments"][0]["w"] == card_presenters.BAR_WIDTH


def test_a_card_bar_is_its_pods_then_what_is_promised_then_free():
    bar = card_presenters.card_bar(cards_of({"cards": [card(2, 1_000, 700, pods=[pod("a/p", 250, "a/j")])]})[0])
    assert bar["label"] == "GPU 2" and bar["free"] == "300 MiB"
    assert [(s["x"], s["w"]) for s in bar["segments"]] == [(0.0, 150.0), (150.0, 270.0)]
    assert bar["segments"][1]["title"] == "450 MiB promised to pods on their way"
    assert (bar["free_x"], bar["free_w"]) == (420.0, 180.0)


def test_the_job_page_names_each_pods_card(client, alice, example_text):
    client.force_login(alice)
    job = services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), "nb"), source="web")
    Job.objects.filter(pk=job.pk).update(
        state=State.RUNNING,
        placement=[["Worker", 0, "share-gpushare-0"], ["Worker", 1, "gpu-1"]],
        cards=[["Worker", 0, [1]]],
    )
    pods = [
        {"name": "nb-worker-0", "role": "worker", "phase": "Running", "node": "share-gpushare-0", "gated": False},
        {"name": "nb-worker-1", "role": "worker", "phase": "Running", "node": "gpu-1", "gated": False},
    ]
    pods[0]["cards"] = [1]
    publish(NODES, pods={"team-a/nb": {"job": job.pk, "replicas": {"worker": {"Running": 2}}, "pods": pods}})
    table = client.get(f"/jobs/{job.pk}/").content.decode().split('id="placement-table"')[1].split("</table>")[0]
    rows = table.split("<tr class=")[1:]
    assert '<td>share-gpushare-0 <small class="card">GPU 1</small></td>' in rows[0]  # planned and got
    assert rows[0].count("GPU 1") == 2
    assert "<td>gpu-1</td>" in rows[1] and "GPU" not in rows[1]


def test_placement_rows_read_odd_cards_safely():
    rows = placement_rows(
        [["Worker", 0, "n1"]],
        [{"name": "w0", "role": "worker", "phase": "Running", "node": "n1", "gated": False, "cards": [0, "x", 2]}],
        [["Worker", 0, [0, 2]], "odd", ["Worker"]],
    )
    assert rows[0]["gpus"] == "GPUs 0, 2" and rows[0]["pod"]["gpus"] == "GPUs 0, 2"
    rows = placement_rows(
        [["Worker", 0, "n1"]],
        [{"name": "w0", "role": "worker", "phase": "Running", "node": "n1", "gated": False, "cards": "1"}],
    )
    assert rows[0]["gpus"] == "" and rows[0]["pod"]["gpus"] == ""


def shared_manifest(example_text, resources: str) -> str:
    """mnist-cpu with its limits asking a share of a card instead of a CPU's worth."""
    text = example_text("mnist-cpu")
    limits = text.split("                limits:\n")[1]
    return text.replace(limits, resources)


GPUSHARE_POD = '                  aliyun.com/gpu-mem: "{}"\n'
HAMI_POD = '                  nvidia.com/gpu: "{}"\n                  nvidia.com/gpumem: "{}"\n'


@pytest.mark.parametrize(
    ("resources", "verdict", "message"),
    [
        (GPUSHARE_POD.format(4_000), "fits", "fits a card now: share-gpushare-0 GPU 0 has 4,069 MiB free"),
        (
            GPUSHARE_POD.format(8_138),
            "not now",
            "no card has 8,138 MiB free now: the most is 4,069 MiB (share-gpushare-0 GPU 0)",
        ),
        (GPUSHARE_POD.format(40_000), "never", "no GPU in the cluster has 40,000 MiB: it can never run"),
        (HAMI_POD.format(1, 20_000), "fits", "fits a card now: share-hami-0 GPU 0 has 32,768 MiB free"),
        (HAMI_POD.format(1, 8_000), "fits", "fits a card now: share-hami-0 GPU 1 has 8,768 MiB free"),
        (
            HAMI_POD.format(2, 20_000),
            "not now",
            "no node has 2 cards with 20,000 MiB free now: the most is 32,768 MiB (share-hami-0 GPU 0)",
        ),
        (
            HAMI_POD.format(2, 8_000),
            "fits",
            "fits 2 cards now: share-hami-0 GPUs 0, 1 have 32,768 MiB and 8,768 MiB free",
        ),
        (HAMI_POD.format(3, 8_000), "never", "no 3 GPUs of one node have 8,000 MiB: it can never run"),
    ],
    ids=[
        "gpushare",
        "fits-total-not-a-card",
        "larger-than-any",
        "hami",
        "hami-binpack",
        "hami-not-now",
        "hami-two",
        "hami-never",
    ],
)
def test_the_submit_check_says_whether_a_share_fits_some_card_now(
    client, alice, example_text, resources, verdict, message
):
    client.force_login(alice)
    # gpushare: each card has 4,069 MiB free: 8,138 MiB fits the node's total but no card;
    # HAMi: 32,768 and 8,768 MiB free: binpack takes the fuller card that holds the share.
    publish(NODES, quotas={"team-a": {"hard": {"requests.cpu": 4000}, "used": {}, "reserved": {}}})
    text = shared_manifest(example_text, resources)
    [row] = preview.manifest_preview(alice, text).cards
    assert (row["verdict"], row["message"]) == (verdict, message)
    part = client.post("/submit/check/", {"manifest": text}).content.decode()
    assert f'data-verdict="{verdict}"' in part and message in part
    # The quota rows stay; a pod no card holds fits no node either.
    fits = "team-a, but no node can hold it" if verdict == "never" else "team-a now"
    assert f"Fits the free quota of {fits}" in part


def test_the_submit_check_skips_cordoned_nodes_and_jobs_asking_no_share(alice, example_text):
    cordoned = {**GPUSHARE, "unschedulable": True}
    publish([cordoned, WHOLE])
    [row] = preview.manifest_preview(alice, shared_manifest(example_text, GPUSHARE_POD.format(100))).cards
    assert row["verdict"] == "not now" and row["message"].endswith("no card is free")
    publish([WHOLE])
    [row] = preview.manifest_preview(alice, shared_manifest(example_text, GPUSHARE_POD.format(100))).cards
    assert row == {
        **row,
        "verdict": "never",
        "message": "no GPU in the cluster is shared by gpushare: it can never run",
    }
    assert preview.manifest_preview(alice, example_text("mnist-cpu")).cards == []
    whole = shared_manifest(example_text, '                  nvidia.com/gpu: "1"\n')
    assert preview.manifest_preview(alice, whole).cards == []  # whole cards: no share of one


def test_metrics_export_each_shared_cards_memory(settings):
    settings.JOBDASH_METRICS_TOKEN = ""
    publish(NODES + [node("odd", {}, cards=[{"memory": "x"}, None])])
    text = Client().get("/metrics").content.decode()
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    total = {
        (s.labels["node"], s.labels["card"], s.labels["model"]): s.value
        for s in families["jobdash_gpu_card_memory_bytes"]
    }
    used = {(s.labels["node"], s.labels["card"]): s.value for s in families["jobdash_gpu_card_memory_used_bytes"]}
    assert total == {
        ("share-gpushare-0", "0", "gpushare"): CARD * MIB,
        ("share-gpushare-0", "1", "gpushare"): CARD * MIB,
        ("share-hami-0", "0", "hami"): 32_768 * MIB,
        ("share-hami-0", "1", "hami"): 32_768 * MIB,
    }
    assert used[("share-gpushare-0", "0")] == 12_207 * MIB and used[("share-hami-0", "0")] == 0


def test_the_submit_check_says_a_pod_larger_than_every_node_can_never_run(client, alice, example_text):
    """16 whole GPUs in one pod: the largest node has 8. HAMi's node counts 20 vGPUs but one
    pod gets one per card (2 here), so it is no larger node for whole GPUs."""
    client.force_login(alice)
    quota = {"hard": {"requests.nvidia.com/gpu": 32}, "used": {}, "reserved": {}}
    publish(NODES, quotas={"team-a": quota})
    text = shared_manifest(example_text, '                  nvidia.com/gpu: "16"\n')
    never = "never fits any node: a Worker pod needs 16 nvidia.com/gpu, the largest node (gpu-1) has 8"
    assert preview.manifest_preview(alice, text).never == never
    part = client.post("/submit/check/", {"manifest": text}).content.decode()
    assert f"It can never run as it is: {never}." in part
    assert "Fits the free quota of team-a, but no node can hold it" in part and "team-a now" not in part
    eight = shared_manifest(example_text, '                  nvidia.com/gpu: "8"\n')
    assert preview.manifest_preview(alice, eight).never == ""
    assert "Fits the free quota of team-a now" in client.post("/submit/check/", {"manifest": eight}).content.decode()
