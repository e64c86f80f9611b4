"""The GPU-sharing benchmark's simulation on inputs small enough to work out by hand.

Times are seconds after T0; the simulation plans every 10 s of virtual time at which
something arrived or finished, and an admitted pod starts at once.
"""

import pytest

from bench.core_planner import build_world
from bench.replay.trace import DEFAULT_TRACE, parse_time
from bench.sharing_sim import CardLedger, Simulation
from bench.sharing_workload import CARD_MIB, DAY, GPU_MEM, Cluster, SimJob, busiest_day, pod_jobs
from queueing import plan

T0 = parse_time("2017-10-01")
QUARTER = CARD_MIB // 4  # 4,069 MiB: four fit one 16,276 MiB card exactly


def notebook(job_id: int, memory: int, at: float = 0.0, duration: float = 1_000.0) -> SimJob:
    return SimJob(job_id, "notebook", "notebooks", T0 + at, duration, memory=memory)


def training(job_id: int, gpus: int, at: float = 0.0, duration: float = 500.0) -> SimJob:
    return SimJob(job_id, "training", "vc-a", T0 + at, duration, gpus=gpus)


def run(jobs, cluster, sharing):
    simulation = Simulation(jobs, cluster, sharing)
    return simulation, simulation.run((T0, T0 + 10_000), T0 + DAY)


def test_four_quarter_card_pods_run_at_once_on_one_shared_card_and_one_at_a_time_on_a_whole_one():
    jobs = [notebook(n, QUARTER) for n in range(1, 5)]
    cluster = Cluster(whole=0, shared=1, cards=1)
    _, whole = run(jobs, cluster, sharing=False)
    _, shared = run(jobs, cluster, sharing=True)
    assert shared["running_peak"]["notebook"] == 4
    assert whole["running_peak"]["notebook"] == 1
    assert shared["queue_s"]["notebook"]["max"] == 0
    assert whole["queue_s"]["notebook"]["max"] == 3_000  # the fourth waits for three to finish
    # Sharing: the card is full for 1,000 s of the 10,000 measured; whole-card: 12,207 MiB idle for 4,000 s.
    assert shared["idle_gib_on_allocated_cards_avg"] == 0
    assert whole["idle_gib_on_allocated_cards_avg"] == pytest.approx(12_207 * 4_000 / 10_000 / 1024, abs=0.1)
    assert whole["card_violations"] == shared["card_violations"] == 0


def test_four_pods_of_four_gib_do_not_fit_a_16276_mib_card():
    jobs = [notebook(n, 4_096) for n in range(1, 5)]
    _, shared = run(jobs, Cluster(whole=0, shared=1, cards=1), sharing=True)
    assert shared["running_peak"]["notebook"] == 3
    assert shared["queue_s"]["notebook"]["max"] == 1_000
    assert shared["card_violations"] == 0


def test_training_keeps_to_whole_cards_and_pods_share_without_overcommitting_a_card():
    jobs = [training(1, 4), training(2, 4, at=5), training(3, 2, at=12), training(4, 4, at=20)]
    jobs += [notebook(10 + n, memory, at=3 * n) for n, memory in enumerate([1_024, 8_192, 16_276, 2_048, 4_096] * 4)]
    cluster = Cluster(whole=2, shared=2, cards=4)  # 8 whole GPUs: job 4 waits for job 1
    simulation, shared = run(jobs, cluster, sharing=True)
    assert shared["card_violations"] == 0 and shared["node_overcommits"] == 0
    assert shared["queue_s"]["training"]["never_started"] == 0
    # No training pod ever went to a shared node: its cards only ever carry pods' shares.
    assert all(not any(simulation.ledger.whole[f"shared-{i:03d}"]) for i in range(2))
    _, whole = run(jobs, cluster, sharing=False)
    assert whole["card_violations"] == 0
    # Whole cards: one pod per card of the 16, beside training; shared: all 20 (126,544 MiB) on the 8 shared cards.
    assert shared["running_peak"]["notebook"] > whole["running_peak"]["notebook"]
    assert shared["queue_s"]["notebook"]["avg"] < whole["queue_s"]["notebook"]["avg"]


def test_the_ledger_refuses_what_a_card_cannot_hold():
    ledger = CardLedger(Cluster(whole=1, shared=1, cards=2), sharing=True)
    assert ledger.start_shared("shared-000", 0, 1, 10_000)
    assert not ledger.start_shared("shared-000", 0, 2, 6_277)  # 6,276 MiB left
    assert not ledger.start_shared("shared-000", 2, 2, 1)  # no card 2
    assert not ledger.start_shared("whole-000", 0, 2, 1)  # this node hands out whole cards
    assert ledger.start_whole("shared-000", 3, 1, CARD_MIB) is None  # and this one shares
    assert ledger.start_whole("whole-000", 3, 2, CARD_MIB) == (0, 1)
    assert ledger.start_whole("whole-000", 4, 1, CARD_MIB) is None
    assert (ledger.idle_mib, ledger.empty) == (CARD_MIB - 10_000, 1)
    ledger.release("shared-000", (0,), 1)
    assert (ledger.idle_mib, ledger.empty) == (0, 2)


def test_the_pod_day_is_seeded_and_runs_the_stated_rates():
    day = pod_jobs(T0, seed=1, first_id=1_000)
    assert day == pod_jobs(T0, seed=1, first_id=1_000)
    notebooks = sum(1 for job in day if job.kind == "notebook")
    assert 600 < notebooks < 840 and 1_300 < len(day) - notebooks < 1_600  # 30/h and 60/h over 24 h
    assert {job.memory for job in day} == {1_024, 2_048, 4_096, 8_192, CARD_MIB}


@pytest.mark.skipif(not DEFAULT_TRACE.exists(), reason="the Philly trace is not checked out")
def test_the_busiest_days_are_the_ones_the_report_names():
    assert busiest_day("2017-10") == parse_time("2017-10-20")
    assert busiest_day("2017-11") == parse_time("2017-11-16")


def test_the_planner_benchmark_with_shared_cards_changes_only_its_share_of_nodes_and_jobs():
    plain = build_world(2_000, 10, 50, True)
    shared = build_world(2_000, 10, 50, True, shared_share=0.2)
    changed = [(a, b) for a, b in zip(plain.nodes, shared.nodes, strict=True) if a != b]
    assert changed and all(b.cards is not None and "nvidia.com/gpu" not in b.allocatable for _, b in changed)
    assert all(sum(b.cards.used) == b.allocated[GPU_MEM] for _, b in changed)
    jobs = [b for a, b in zip(plain.pending, shared.pending, strict=True) if a.workload.name != b.workload.name]
    assert 300 < len(jobs) < 500 and all(dict(job.gang[0].requests).get(GPU_MEM) for job in jobs)
    result = plan(shared)
    on_cards = {admission.job_id for admission in result.admissions} & {job.id for job in jobs}
    assert on_cards and on_cards <= set(result.cards)
