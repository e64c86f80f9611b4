"""jobs/' one door to the running system (jobs/cluster_port.py): what the status reads make
of the election backend's answer, and that a submission's sources are the cluster's."""

import pytest

from jobdash.cluster import priorities, runtimes
from jobdash.jobs import cluster_port, cluster_selectors
from jobdash.jobs.models import Fence
from jobdash.leader import BackendError, Leadership
from jobdash.leader import factory as leader_factory


class Elector:
    def __init__(self, holder):
        self._holder = holder

    def holder(self):
        if isinstance(self._holder, Exception):
            raise self._holder
        return self._holder


@pytest.fixture
def election(monkeypatch, settings):
    settings.JOBDASH_LEADER = "consul"

    def answer(holder):
        monkeypatch.setattr(leader_factory, "elector_from_settings", lambda: Elector(holder))

    return answer


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("holder", "alive"),
    [
        (Leadership("host:1", 7, 0.0), True),
        (Leadership("host:2", 8, 0.0), False),  # a newer leader the fence has not heard of
        (None, False),  # the lock is gone
        (BackendError("consul is down"), None),  # unknown, not "no leader"
    ],
)
def test_the_recorded_leader_is_alive_only_while_the_election_names_its_term(election, holder, alive):
    Fence.objects.create(id=1, term=7, holder="host:1")
    election(holder)
    assert cluster_selectors.leader(reveal_identity=True)["alive"] is alive


def test_the_election_backends_error_is_the_ports_own(election):
    election(BackendError("consul is down"))
    with pytest.raises(cluster_port.ElectionUnreadable, match="consul is down"):
        cluster_port.leader_term()


def test_a_submissions_sources_are_the_clusters_read_through_the_gateway():
    assert isinstance(cluster_port.runtime_source(), runtimes.GatewayRuntimes)
    assert isinstance(cluster_port.priority_source(), priorities.GatewayPriorities)
    assert cluster_port.RuntimeUnreadable is runtimes.RuntimeUnreadable
    assert cluster_port.PriorityClassUnreadable is priorities.PriorityClassUnreadable
