"""The collector pause around a cycle (dispatch/collector.py)."""

import gc

import pytest

from jobdash.dispatch.collector import CollectorPause


@pytest.fixture(autouse=True)
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_during_a_cycle_and_collects_after_it():
    pause = CollectorPause(full_every_s=3600)
    with pause.paused():
        assert not gc.isenabled()
        garbage = []
        garbage.append(garbage)  # a cycle: only the collector frees it
        del garbage
    assert gc.isenabled()
    assert pause.collections == {"young": 1, "full": 0}


def test_cyclic_garbage_made_in_a_cycle_is_freed_after_it():
    import weakref

    class Node:
        pass

    pause = CollectorPause(full_every_s=3600)
    with pause.paused():
        node = Node()
        node.me = node
        alive = weakref.ref(node)
        del node
        assert alive() is not None  # not collected during the cycle
    assert alive() is None


def test_everything_is_collected_once_the_interval_has_passed():
    pause = CollectorPause(full_every_s=0.0)
    with pause.paused():
        pass
    with pause.paused():
        pass
    assert pause.collections == {"young": 0, "full": 2}


def test_a_caller_that_turned_the_collector_off_keeps_it_off():
    pause = CollectorPause()
    gc.disable()
    with pause.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
    assert pause.collections == {"young": 0, "full": 0}
